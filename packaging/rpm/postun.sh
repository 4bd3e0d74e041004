# hostagent's %postun, as %systemd_postun_with_restart: after an upgrade ($1 is 1 or more) restart
# the daemon if it was running, so the new binary serves; after a removal only reload systemd.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -ge 1 ]; then
        systemctl try-restart hostagent.service >/dev/null 2>&1 || :
    fi
fi
