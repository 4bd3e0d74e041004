#!/bin/bash
# /usr/lib/dracut/modules.d/90hostagent/module-setup.sh: the dracut side of initramfs-tools-hook.
# dracut copies /usr/lib/modprobe.d/*.conf itself (its kernel-modules module).
check() {
    return 0
}

depends() {
    return 0
}

install() {
    inst_simple /usr/libexec/hostagent/hold-at-boot
    [ -e /var/lib/hostagent/held-at-boot ] && inst_simple /var/lib/hostagent/held-at-boot
    return 0
}
