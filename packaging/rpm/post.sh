# hostagent's %post: what %sysusers_create_compat, %tmpfiles_create and %systemd_post do (the package
# is built by CPack, without the distribution's macros). $1 is 1 on install, 2 or more on upgrade.
# Enabled on install, not started, as RPM distributions do: `systemctl start hostagent`.
if command -v systemd-sysusers >/dev/null 2>&1; then
    systemd-sysusers /usr/lib/sysusers.d/hostagent.conf || :
elif ! getent group hostagent >/dev/null; then
    groupadd -r hostagent || :
fi
if [ -d /run/systemd/system ]; then
    systemd-tmpfiles --create /usr/lib/tmpfiles.d/hostagent.conf >/dev/null 2>&1 || :
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -eq 1 ]; then
    systemctl --no-reload enable hostagent-initramfs.path hostagent.socket hostagent.service >/dev/null 2>&1 || :
fi
