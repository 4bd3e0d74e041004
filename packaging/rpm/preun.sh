# hostagent's %preun, as %systemd_preun: on removal ($1 is 0; not on upgrade) disable and stop the
# daemon and its socket. The VMs keep running under libvirtd.
if [ "$1" -eq 0 ]; then
    systemctl --no-reload disable --now hostagent.service hostagent.socket hostagent-initramfs.path >/dev/null 2>&1 || :
fi
