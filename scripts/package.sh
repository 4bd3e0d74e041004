#!/usr/bin/env bash
# Builds hostagent's .deb and .rpm (CPack) from the default tree, the one whose binaries the suite
# tested (built here if it is not), into build/package/out and checks them: lintian on the .deb; the
# .rpm's files and metadata (rpm -qlp, -qip); the .deb installed with apt into a clean Debian 12
# root (debootstrap), checked there (files, owners, modes, the group, the conffile, systemd-analyze
# verify, both binaries run), booted under systemd (systemd-nspawn) to run hostagentd through the
# packaged units, a VM made under the previous release's package (a real guest on this machine's
# libvirtd), upgraded to this build with an edited conffile and downgraded again, the VM running on
# through both (the same QEMU process, adopted by each new daemon), removed and purged. Ends with a
# summary and the time each part took.
# Usage: scripts/package.sh   (as root, on Debian 12, after scripts/install-deps.sh; scripts/test.sh
# runs it). A part that cannot run (no mirror, not root) prints "SKIPPED: why", or fails under
# HOSTAGENT_REQUIRE_LIBVIRTD=1 (CI). HOSTAGENT_DEBIAN_MIRROR overrides the mirror (default: the one
# apt uses here); HOSTAGENT_PACKAGE_KEEP_ROOT=1 keeps the root in build/package/root afterwards.
# The minbase tarball and the root with the package's dependencies are cached outside the clone
# ($HOSTAGENT_CACHE_DIR/package, scripts/lib/caches.sh), so a rerun, or CI's next clone, needs no
# network.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/caches.sh
src="$PWD"
tree="$src/build/default"
build="$src/build/package"
out="$build/out"
cache="$HOSTAGENT_CACHE_DIR/package"
root="$build/root"
require="${HOSTAGENT_REQUIRE_LIBVIRTD:-0}"
suite=bookworm

summary=()
part_start=0
begin() {
  echo "=== package: $1"
  part_start=$(date +%s%N)
}
# end NAME RESULT: one summary line with the part's time.
end() {
  local ms=$((($(date +%s%N) - part_start) / 1000000))
  summary+=("$(printf '%-22s %6d.%01ds  %s' "$1" $((ms / 1000)) $((ms % 1000 / 100)) "$2")")
}
fail() {
  echo "package.sh: FAILED: $*" >&2
  exit 1
}
# A part that cannot run here: a visible skip, or a failure in CI.
skip_or_fail() {
  if [[ $require == 1 ]]; then fail "$* (HOSTAGENT_REQUIRE_LIBVIRTD=1)"; fi
  echo "SKIPPED: ${*:2}"
  summary+=("$(printf '%-22s %8s  SKIPPED: %s' "$1" "-" "${*:2}")")
}
print_summary() {
  echo "=== package: summary"
  printf '%s\n' "${summary[@]}"
}

# What both packages must carry, and nothing else: "PATH MODE" (owner root:root throughout).
expected_files=(
  "/usr/sbin/hostagentd 755"
  "/usr/bin/hostagentctl 755"
  "/usr/lib/systemd/system/hostagent.service 644"
  "/usr/lib/systemd/system/hostagent.socket 644"
  "/usr/lib/sysusers.d/hostagent.conf 644"
  "/usr/lib/tmpfiles.d/hostagent.conf 644"
  "/usr/lib/modules-load.d/hostagent.conf 644"
  "/usr/lib/systemd/system/hostagent-initramfs.path 644"
  "/usr/lib/systemd/system/hostagent-initramfs.service 644"
  "/usr/libexec/hostagent/hold-at-boot 755"
  "/usr/libexec/hostagent/refresh-initramfs 755"
  "/usr/lib/modprobe.d/hostagent.conf 644"
  "/usr/share/initramfs-tools/hooks/hostagent 755"
  "/usr/lib/dracut/modules.d/90hostagent/module-setup.sh 755"
  "/etc/hostagent/hostagent.yaml 644"
  "/etc/logrotate.d/hostagent 644"
  "/usr/share/man/man8/hostagentd.8.gz 644"
  "/usr/share/man/man1/hostagentctl.1.gz 644"
  "/usr/share/bash-completion/completions/hostagentctl 644"
  "/usr/share/zsh/vendor-completions/_hostagentctl 644"
  "/usr/share/doc/hostagent/copyright 644"
)
for template in vmtemplates/templates/*.yaml; do
  expected_files+=("/usr/share/hostagent/templates/${template##*/} 644")
done
deb_only_files=(
  "/usr/share/doc/hostagent/changelog.Debian.gz 644"
  "/usr/share/lintian/overrides/hostagent 644"
)
# The package's own directories (others, like /usr/lib/systemd/system, belong to other packages).
expected_dirs=(
  "/etc/hostagent 755"
  "/etc/hostagent/templates.d 755"
  "/usr/share/hostagent 755"
  "/usr/libexec/hostagent 755"
  "/usr/lib/dracut/modules.d/90hostagent 755"
  "/usr/share/hostagent/templates 755"
  "/usr/share/doc/hostagent 755"
  "/var/lib/hostagent 755"
  "/var/log/hostagent 750"
)

# "drwxr-x---" -> 750 (the permission bits only).
perm_octal() {
  local s="${1:1:9}" value=0 i
  for ((i = 0; i < 9; i++)); do
    value=$((value * 2))
    [[ ${s:i:1} == [-ST] ]] || value=$((value + 1))
  done
  printf '%o' "$value"
}
# compare WHAT EXPECTED_FILE ACTUAL_FILE: both "PATH MODE" lines; prints the difference.
compare() {
  if ! diff -u --label "expected" --label "$1" <(sort "$2") <(sort "$3"); then
    fail "$1 differs from what is expected (- expected, + found)"
  fi
}

# --- build ---------------------------------------------------------------------------------------
begin build
# The default tree: -O2 (Debian's level) with dpkg-buildflags' hardening (fortify, stack protector,
# full RELRO), as CMakePresets.json sets it; cpack strips the binaries (CPACK_STRIP_FILES). Already
# built after the test pass, so this only makes the man pages, the completion and the changelog.
[[ -f $tree/build.ninja ]] || cmake --preset default >/dev/null
cmake --build "$tree" -j "$(nproc)" --target hostagentd hostagentctl hostagent_package_files
# The helper that readies the guest the upgrade runs a VM of (tests/packaging/package_guest.cpp).
cmake --build "$tree" -j "$(nproc)" --target package_guest >/dev/null 2>&1 || true
mkdir -p "$build"
end build "hostagentd, hostagentctl (the tested tree's), man pages, completion"

# --- cpack ---------------------------------------------------------------------------------------
begin cpack
rm -rf "$out"
mkdir -p "$out"
# cpack_into DIR GENERATOR: quiet unless it fails.
cpack_into() {
  (cd "$tree" && cpack -G "$2" -B "$1" >"$1/cpack-$2.log" 2>&1) || {
    cat "$1/cpack-$2.log"
    fail "cpack -G $2"
  }
}
cpack_into "$out" DEB
cpack_into "$out" RPM
deb="$(echo "$out"/hostagent_*_amd64.deb)"
rpm_file="$(echo "$out"/hostagent-*.x86_64.rpm)"
[[ -f $deb && -f $rpm_file ]] || fail "cpack made no .deb or .rpm in $out"
end cpack "$(basename "$deb"), $(basename "$rpm_file")"

# --- the previous release ------------------------------------------------------------------------
# The .deb of the commit before issue 46's first (records then carried no format version), built
# from a worktree of it with the same compiler cache as release 0, older than this build's 1, and
# kept in the cache by commit: the release a VM is made under, upgraded from and downgraded to.
# Built at -O0 without debug information: what the check asks of it is its files, its records and
# its units, never its speed, and a cold cache compiles it whole: 100.6 s on 2 cores against
# 155.7 s at the default tree's -O2 -g1.
prev_commit=1241fac10ebad7de26d83d2adda4998d79fa51be
prev_deb=""
build_prev_deb() {
  local cached="$cache/prev-$prev_commit" dir="$build/prev"
  prev_deb="$(echo "$cached"/hostagent_*_amd64.deb)"
  [[ -f $prev_deb ]] && return 0
  prev_deb=""
  git -C "$src" cat-file -e "$prev_commit^{commit}" 2>/dev/null || return 1  # a shallow clone
  git -C "$src" worktree remove --force "$dir" 2>/dev/null || rm -rf "$dir"
  git -C "$src" worktree add --detach -f "$dir" "$prev_commit" >/dev/null 2>&1 || fail "git worktree add $dir"
  # Called as a condition (set -e is off here): each step says when it fails.
  (
    set -e
    cd "$dir"
    export CCACHE_BASEDIR="$dir"
    cmake --preset default -DHOSTAGENT_PACKAGE_RELEASE=0 -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O0 -DNDEBUG" \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -DNDEBUG" -DCMAKE_C_FLAGS="" -DCMAKE_CXX_FLAGS=""
    cmake --build build/default -j "$(nproc)" --target hostagentd hostagentctl hostagent_package_files
    cd build/default
    cpack -G DEB -B "$dir/out"
  ) >"$out/prev-build.log" 2>&1 || {
    tail -30 "$out/prev-build.log"
    fail "the previous release's .deb (commit $prev_commit) did not build"
  }
  # Release 0 is version 0.1.0 (no Debian revision), older than this build's 0.1.0-1.
  local built
  built="$(echo "$dir"/out/hostagent_*_amd64.deb)"
  [[ -f $built ]] || fail "cpack of commit $prev_commit made no .deb in $dir/out"
  rm -rf "$cached" "$cached.partial.$$"
  mkdir -p "$cached.partial.$$"
  cp "$built" "$cached.partial.$$/" || fail "cannot copy $built into the cache"
  mv "$cached.partial.$$" "$cached"
  git -C "$src" worktree remove --force "$dir"
  prev_deb="$cached/$(basename "$built")"
}
begin "previous release"
if build_prev_deb; then
  end "previous release" "$(basename "$prev_deb") of commit ${prev_commit:0:12}"
else
  skip_or_fail "previous release" "commit $prev_commit is not in this clone (a shallow one?): the VM is made under this build's release 1"
fi

# --- the .deb's contents and control fields, then lintian ------------------------------------------
begin "deb contents"
printf '%s\n' "${expected_files[@]}" >"$out/expected-files"
printf '%s\n' "${expected_files[@]}" "${deb_only_files[@]}" >"$out/expected-deb-files"
printf '%s\n' "${expected_dirs[@]}" >"$out/expected-dirs"
dpkg-deb -c "$deb" >"$out/deb-contents"
# "-rwxr-xr-x root/root 123 2025-01-01 00:00 ./usr/sbin/hostagentd"
awk '$1 ~ /^-/ {sub(/^\./, "", $6); print $1, $2, $6}' "$out/deb-contents" |
  while read -r perms owner path; do
    [[ $owner == root/root ]] || fail "$path in the .deb is owned by $owner, not root/root"
    echo "$path $(perm_octal "$perms")"
  done >"$out/deb-files"
compare ".deb files" "$out/expected-deb-files" "$out/deb-files"
awk '$1 ~ /^d/ {sub(/^\./, "", $6); sub(/\/$/, "", $6); print $1, $6}' "$out/deb-contents" |
  while read -r perms path; do echo "$path $(perm_octal "$perms")"; done >"$out/deb-dirs"
while read -r line; do
  grep -qxF "$line" "$out/deb-dirs" || fail "the .deb lacks the directory '$line' (path mode)"
done <"$out/expected-dirs"
depends="$(dpkg-deb -f "$deb" Depends)"
for dep in "libvirt-daemon-system (>= 9.0.0)" "qemu-system-x86 (>= 1:7.2)" "qemu-utils (>= 1:7.2)" kmod libvirt0 libc6; do
  [[ ", $depends," == *", $dep"[\ ,]* ]] || fail "the .deb's Depends lacks $dep: $depends"
done
# Built against the current stack's libvirt, the binaries must still run on Debian 12's: the
# libvirt0 that dpkg-shlibdeps asks for (the newest symbol used) is no newer than 9.0.
libvirt0="$(sed -nE 's/.*libvirt0 \(>= ([^)]+)\).*/\1/p' <<<"$depends")"
if [[ -n $libvirt0 ]] && ! dpkg --compare-versions "$libvirt0" le 9.0.0; then
  fail "the binaries need libvirt0 >= $libvirt0 (a symbol newer than Debian 12's libvirt 9.0): $depends"
fi
for conffile in /etc/hostagent/hostagent.yaml /etc/logrotate.d/hostagent; do
  dpkg-deb -I "$deb" conffiles | grep -qx "$conffile" || fail "$conffile is not a conffile"
done
echo "Depends: $depends"
end "deb contents" "$(wc -l <"$out/deb-files") files as expected, Depends as expected"

begin lintian
if ! command -v lintian >/dev/null; then
  skip_or_fail lintian "lintian is not installed (scripts/install-deps.sh installs it)"
else
  # Errors fail; warnings and the rest are listed. The package's overrides
  # (usr/share/lintian/overrides/hostagent) are shown as O:, each with its reason.
  lintian_status=0
  lintian --fail-on error --display-info --show-overrides "$deb" >"$out/lintian.txt" 2>&1 || lintian_status=$?
  cat "$out/lintian.txt"
  ((lintian_status == 0)) || fail "lintian reported errors (above)"
  counts="$(grep -c '^E:' "$out/lintian.txt" || true) errors, $(grep -c '^W:' "$out/lintian.txt" || true) warnings,"
  counts+=" $(grep -c '^I:' "$out/lintian.txt" || true) info, $(grep -c '^O:' "$out/lintian.txt" || true) overridden"
  echo "lintian: $counts"
  end lintian "$counts"
fi

# --- the audit log's rotation, as logrotate reads the shipped file --------------------------------
begin logrotate
if ! command -v logrotate >/dev/null; then
  skip_or_fail logrotate "logrotate is not installed (scripts/install-deps.sh installs it)"
else
  lr="$out/logrotate"
  rm -rf "$lr" && mkdir -p "$lr/deb"
  dpkg-deb -x "$deb" "$lr/deb"
  # The shipped file pointed at a scratch log: read without an error (logrotate only warns about an
  # unknown option, exit 0), and a forced rotation renames the log, makes a new one and runs
  # postrotate (whose reload fails quietly where no hostagent runs, as on a host being installed).
  sed "s|/var/log/hostagent/audit.log|$lr/audit.log|" "$lr/deb/etc/logrotate.d/hostagent" >"$lr/hostagent"
  echo '{"n":1}' >"$lr/audit.log"
  logrotate --verbose --force --state "$lr/state" "$lr/hostagent" >"$lr/log" 2>&1 ||
    fail "logrotate on the shipped file: $(cat "$lr/log")"
  if grep -q '^error:' "$lr/log"; then fail "logrotate read the shipped file with errors: $(cat "$lr/log")"; fi
  [[ "$(cat "$lr/audit.log.1" 2>/dev/null)" == '{"n":1}' ]] || fail "logrotate did not rotate the log: $(cat "$lr/log")"
  [[ "$(stat -c '%a' "$lr/audit.log" 2>/dev/null)" == 640 ]] || fail "logrotate did not make a new log 0640"
  grep -q 'running postrotate script' "$lr/log" || fail "logrotate ran no postrotate: $(cat "$lr/log")"
  end logrotate "the shipped file rotates the audit log, makes a new one 0640, runs postrotate"
fi

# --- the .rpm ------------------------------------------------------------------------------------
begin rpm
if ! command -v rpm >/dev/null; then
  skip_or_fail rpm "rpm is not installed (scripts/install-deps.sh installs it)"
else
  rpm -qip "$rpm_file"
  echo "Requires:"
  rpm -qp --requires "$rpm_file" | sed 's/^/  /'
  rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} flags=%{FILEFLAGS:fflags} %{FILENAMES}\n]' \
    "$rpm_file" >"$out/rpm-list"
  echo "Files (mode, owner, flags, path):"
  sed 's/^/  /' "$out/rpm-list"
  awk '$1 ~ /^-/ {print $1, $2, $4}' "$out/rpm-list" | while read -r perms owner path; do
    [[ $owner == root:root ]] || fail "$path in the .rpm is owned by $owner, not root:root"
    echo "$path $(perm_octal "$perms")"
  done >"$out/rpm-files"
  compare ".rpm files" "$out/expected-files" "$out/rpm-files"
  awk '$1 ~ /^d/ {print $4, $1}' "$out/rpm-list" | while read -r path perms; do
    echo "$path $(perm_octal "$perms")"
  done >"$out/rpm-dirs"
  # The .rpm owns exactly the package's directories: never /usr/lib/systemd/system and the like.
  compare ".rpm directories" "$out/expected-dirs" "$out/rpm-dirs"
  for conffile in /etc/hostagent/hostagent.yaml /etc/logrotate.d/hostagent; do
    grep -qE "^-\\S+ root:root flags=cn $conffile\$" "$out/rpm-list" || fail "$conffile is not %config(noreplace) in the .rpm"
  done
  meta="$(rpm -qp --qf '%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE}' "$rpm_file")"
  project_version="$(sed -nE 's/^project\(hostagent VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)"
  [[ $meta == "hostagent $project_version 1 x86_64 "?* ]] || fail "the .rpm's metadata: $meta"
  requires="$(rpm -qp --requires "$rpm_file")"
  for dep in "libvirt-daemon-driver-qemu >= 9.0.0" "qemu-kvm >= 7.2" "qemu-img >= 7.2" kmod libvirt-libs hwloc-libs yaml-cpp; do
    grep -qx "$dep" <<<"$requires" || fail "the .rpm does not require $dep"
  done
  scripts="$(rpm -qp --scripts "$rpm_file")"
  for scriptlet in postinstall preuninstall postuninstall; do
    grep -q "^$scriptlet scriptlet" <<<"$scripts" || fail "the .rpm has no $scriptlet scriptlet"
  done
  end rpm "$meta; $(wc -l <"$out/rpm-files") files as expected; requires, scriptlets, %config"
fi

# --- a clean Debian 12 root ----------------------------------------------------------------------
# The host's Debian entries for bookworm, bookworm-updates and bookworm-security ("URI SUITE"), from
# one-line and deb822 sources.
debian_sources() {
  python3 - "$suite" <<'EOF'
import glob, re, sys
suite = sys.argv[1]
entries = []
def add(types, uris, suites, components):
    if "deb" in types and "main" in components:
        entries.extend((u.rstrip("/"), s) for u in uris for s in suites if re.fullmatch(suite + r"(-updates|-security)?", s))
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        words = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
        if len(words) >= 4:
            add([words[0]], [words[1]], [words[2]], words[3:])
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        fields = {}
        for line in stanza.splitlines():
            if ":" in line and not line.startswith(("#", " ")):
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.split()
        add(fields.get("types", []), fields.get("uris", []), fields.get("suites", []), fields.get("components", []))
for uri, s in dict.fromkeys(entries):
    print(uri, s)
EOF
}

# Unmount whatever is mounted under the root (proc), deepest first; then it can be removed without
# reaching outside it.
unmount_root() {
  local target
  while read -r target; do umount "$target" || umount -l "$target"; done < <(findmnt -rn -o TARGET | grep -E "^$root/" | sort -r)
}
# The root lives on a tmpfs of its own, made empty here and dropped whole: removing its 470 MB
# file by file took 60-68 s in three of four runs on this machine's ext4, mounted with discard
# (each freed extent is trimmed as it goes).
remove_root() {
  unmount_root
  if findmnt -rn -o TARGET | grep -qE "^$root/"; then fail "something is still mounted under $root"; fi
  if mountpoint -q "$root"; then umount "$root"; fi
  rm -rf --one-file-system "$root"
}
empty_root() {
  remove_root
  mkdir -p "$root"
  mount -t tmpfs -o size=4g,mode=0755 hostagent-package-root "$root"
}
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@" </dev/null; }

# A fresh root in $root from the cached minbase tarball (made from the mirror the first time;
# --unpack-tarball needs the mirror it was made from, hence one per mirror).
fresh_minbase() {
  local mirror="$1" tarball
  tarball="$cache/$suite-minbase-$(echo "$mirror" | sha256sum | cut -c1-8).tgz"
  mkdir -p "$cache"
  if [[ ! -s $tarball ]]; then
    rm -rf "$build/debootstrap-work"
    debootstrap --variant=minbase --make-tarball="$cache/partial-$suite-minbase.tgz" "$suite" \
      "$build/debootstrap-work" "$mirror" >"$build/debootstrap.log" 2>&1 || {
      tail -3 "$build/debootstrap.log"
      rm -rf "$build/debootstrap-work" "$cache/partial-$suite-minbase.tgz"
      return 1
    }
    mv "$cache/partial-$suite-minbase.tgz" "$tarball"
    rm -rf "$build/debootstrap-work"
  fi
  empty_root
  debootstrap --variant=minbase --unpack-tarball="$tarball" "$suite" "$root" "$mirror" \
    >"$build/debootstrap.log" 2>&1 || {
    tail -20 "$build/debootstrap.log"
    fail "debootstrap --unpack-tarball (log: $build/debootstrap.log)"
  }
}

# $root: minbase plus the .deb's dependencies, from the mirror the first time and from the cached
# tarball of that root afterwards (keyed by the Depends line and the sources).
prepare_root() {
  local sources="$1" mirror="$2" key deps_tar
  key="$( (dpkg-deb -f "$deb" Depends && echo "$sources") | sha256sum | cut -c1-16)"
  deps_tar="$cache/root-$suite-$key.tar"
  if [[ -s $deps_tar ]]; then
    empty_root
    tar -C "$root" -xf "$deps_tar"
    root_origin="cached root $(basename "$deps_tar")"
    return 0
  fi
  fresh_minbase "$mirror" || return 1
  awk '{print "deb", $1, $2, "main"}' <<<"$sources" >"$root/etc/apt/sources.list"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # As in any chroot: no package may start a daemon here (libvirt-daemon-system's postinst would).
  printf '#!/bin/sh\n# scripts/package.sh: start no services in this root\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/package-sh-unsafe-io"
  mount -t proc proc "$root/proc"
  # --error-on=any: an unreachable mirror fails here (apt-get update alone only warns).
  in_root apt-get update -qq --error-on=any || return 1
  # What the .deb depends on, from the mirror; systemd for systemd-analyze and systemd-tmpfiles.
  in_root apt-get satisfy -y -qq --no-install-recommends "$(dpkg-deb -f "$deb" Depends), systemd" \
    >"$build/apt-deps.log" 2>&1 || {
    tail -20 "$build/apt-deps.log"
    fail "apt-get satisfy in the root (log: $build/apt-deps.log)"
  }
  in_root apt-get clean
  unmount_root
  rm -f "$cache"/root-"$suite"-*.tar
  tar -C "$root" --one-file-system -cf "$cache/partial.tar" .
  mv "$cache/partial.tar" "$deps_tar"
  root_origin="debootstrap from $mirror, dependencies from the mirror"
}

# check_files LABEL: every expected file and directory in the root, with its mode and root:root.
check_files() {
  local paths=() line
  for line in "${expected_files[@]}" "${deb_only_files[@]}" "${expected_dirs[@]}"; do paths+=("${line%% *}"); done
  in_root stat -c '%n %a %U:%G' "${paths[@]}" >"$out/root-stat" || fail "$1: files missing in the root (above)"
  sed 's/ root:root$//' "$out/root-stat" >"$out/root-files"
  grep -v ' root:root$' "$out/root-stat" && fail "$1: files above are not root:root"
  compare "$1: installed files" <(printf '%s\n' "${expected_files[@]}" "${deb_only_files[@]}" "${expected_dirs[@]}") \
    "$out/root-files"
}

check_installed() {
  check_files "install"
  in_root getent group hostagent || fail "no hostagent group in the root"
  local conffiles
  conffiles="$(in_root dpkg-query -W -f='${Conffiles}' hostagent)"
  echo "conffiles:$conffiles"
  [[ $conffiles == *" /etc/hostagent/hostagent.yaml "* ]] || fail "dpkg does not list hostagent.yaml as a conffile"
  # postinst enabled the units (offline: deb-systemd-helper makes the links without systemd).
  local link
  for link in multi-user.target.wants/hostagent.service sockets.target.wants/hostagent.socket \
    paths.target.wants/hostagent-initramfs.path; do
    [[ -L $root/etc/systemd/system/$link ]] || fail "postinst did not enable ${link##*/} (no /etc/systemd/system/$link)"
  done
  local units=(/usr/lib/systemd/system/hostagent.service /usr/lib/systemd/system/hostagent.socket
    /usr/lib/systemd/system/hostagent-initramfs.path /usr/lib/systemd/system/hostagent-initramfs.service) verify
  # Loads the units as systemd would (their ExecStart= binaries must be there) and reports every
  # problem; any output at all is a failure. --man=no: the root has no man-db to look up
  # Documentation=man:...; the pages are in the file list above, and lintian checks them.
  verify="$(in_root systemd-analyze verify --man=no "${units[@]}" 2>&1)" || fail "systemd-analyze verify: $verify"
  [[ -z $verify ]] || fail "systemd-analyze verify: $verify"
  echo "systemd-analyze verify: clean"
  # kmod reads the boot hold's install line as written (packaging/boot/modprobe.conf).
  if in_root sh -c 'command -v modprobe' >/dev/null; then
    in_root modprobe --showconfig | grep -qxF 'install nvme /usr/libexec/hostagent/hold-at-boot; /sbin/modprobe --ignore-install nvme $CMDLINE_OPTS' ||
      fail "modprobe --showconfig does not list hostagent's install line for nvme"
    echo "modprobe --showconfig: the install line for nvme is read"
  else
    echo "modprobe --showconfig: SKIPPED: no modprobe (kmod) in the root"
  fi
  in_root systemd-analyze security --offline=true "${units[0]}" 2>&1 | tail -1 | sed 's/^→ /systemd-analyze security: /'
  # The tmpfiles.d entries make /run/hostagent as the socket needs it ...
  in_root systemd-tmpfiles --create /usr/lib/tmpfiles.d/hostagent.conf
  [[ "$(in_root stat -c '%a %U:%G' /run/hostagent)" == "750 root:hostagent" ]] ||
    fail "systemd-tmpfiles made /run/hostagent as $(in_root stat -c '%a %U:%G' /run/hostagent)"
  # ... and the boot images' directory (images.directories' default), readable by QEMU.
  [[ "$(in_root stat -c '%a %U:%G' /var/lib/hostagent/images)" == "755 root:root" ]] ||
    fail "systemd-tmpfiles made /var/lib/hostagent/images as $(in_root stat -c '%a %U:%G' /var/lib/hostagent/images)"
  in_root hostagentd --version
  in_root hostagentctl --version
  # The binaries find the shipped templates beside them (PREFIX/share/hostagent/templates,
  # install_paths.hpp): the templates (with extends:) validate, and the embedded default loads them.
  in_root sh -c 'hostagentctl template validate /usr/share/hostagent/templates/*.yaml'
  in_root hostagentd --simulated vela2 --exec list >/dev/null || fail "hostagentd --simulated vela2 --exec list"
  bash -n "$root/usr/share/bash-completion/completions/hostagentctl" || fail "the bash completion does not parse"
}

# The booted root's PID 1 (set by boot_root) and systemd-nspawn's pid; empty: not booted.
container=""
nspawn_pid=""
# in_target COMMAND...: run a command in the root: inside the booted container when it runs
# (maintainer scripts then see a running systemd), in the chroot otherwise.
in_target() {
  if [[ -n $container ]]; then
    nsenter -t "$container" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive "$@" </dev/null
  else
    in_root "$@"
  fi
}
unit_property() { in_target systemctl show -P "$2" "$1"; }

# Boots the installed root with systemd-nspawn (systemd as its PID 1) and waits for
# hostagent.service: the packaged units, every hardening directive; a drop-in only points
# ExecStart= at a configuration for the simulated vela2 host on libvirt's test:/// driver.
# Returns 1 when nspawn cannot boot the root here, 2 when hostagent.service does not start.
boot_root() {
  local dropin="$root/etc/systemd/system/hostagent.service.d" pid="" state="" i
  sed -e 's|^  uri: qemu:///system$|  uri: test:///default|' -e 's|^  domain_type: kvm$|  domain_type: test|' \
    -e 's|^  simulated: ""$|  simulated: vela2|' -e 's|^  preparation: hostagent$|  preparation: libvirt|' \
    "$root/etc/hostagent/hostagent.yaml" >"$root/etc/hostagent-simulated.yaml"
  mkdir -p "$dropin"
  printf '[Service]\nExecStart=\nExecStart=/usr/sbin/hostagentd --config /etc/hostagent-simulated.yaml\n' \
    >"$dropin/simulated.conf"
  # Booted, the root may start services: the maintainer scripts' starts and restarts are checked.
  rm -f "$root/usr/sbin/policy-rc.d"
  unmount_root
  # --private-network: the container's libvirtd must not touch this machine's network (bridges,
  # firewall rules); hostagentd there needs only its unix socket.
  systemd-nspawn -q --register=no --keep-unit --private-network "${nspawn_binds[@]}" -D "$root" -b \
    >"$out/nspawn.log" 2>&1 &
  nspawn_pid=$!
  for ((i = 0; i < 600; i++)); do
    # The container's systemd, once nspawn has started it (its child named systemd).
    [[ -n $pid ]] || pid="$(pgrep -x -P "$nspawn_pid" systemd | head -1 || true)"
    if [[ -n $pid ]]; then
      container="$pid"
      state="$(unit_property hostagent.service ActiveState 2>/dev/null || true)"
      [[ $state == active || $state == failed ]] && break
    fi
    kill -0 "$nspawn_pid" 2>/dev/null || break
    sleep 0.2
  done
  if [[ -z $pid ]] || ! kill -0 "$nspawn_pid" 2>/dev/null; then
    tail -20 "$out/nspawn.log"
    stop_container
    return 1
  fi
  in_target systemctl status --no-pager -n 20 hostagent.service hostagent.socket || true
  [[ $state == active ]] || {
    echo "hostagent.service is ${state:-not started} after 120 s under systemd"
    return 2
  }
}
stop_container() {
  if [[ -n $container ]]; then in_target systemctl poweroff 2>/dev/null || true; fi
  if [[ -n $nspawn_pid ]]; then
    timeout 60 tail --pid="$nspawn_pid" -f /dev/null || kill "$nspawn_pid" 2>/dev/null || true
    wait "$nspawn_pid" 2>/dev/null || true
  fi
  container=""
  nspawn_pid=""
}
# On any exit: the container powered off before the root is unmounted, and the VM's leftovers
# (its domain, the pool) gone from this machine's libvirtd.
on_exit() {
  if ((vm_ready)) && [[ -n $container ]]; then package_guest cleanup >/dev/null || true; fi
  stop_container
  unmount_root
}

# --- a VM through the upgrade --------------------------------------------------------------------
# The packaged hostagentd drives a real guest (the suites' test guest, TCG) on the root's own
# libvirtd and QEMU: Debian 12's (libvirt 9.0, QEMU 7.2), installed as the package's dependencies
# from the stock mirror, while this machine runs the current stack (scripts/install-deps.sh). So
# Debian 12's stack runs a booted guest through its whole life here: created, kept through an
# upgrade and a downgrade, deleted. The container's /run/libvirt is vm_dir/run-libvirt on this
# machine, so that package_guest reaches that libvirtd through its socket; the guest's files, disk
# pool and console log lie in vm_dir, which the container sees at the same path; its hugepages come
# from this machine's pool (/dev/hugepages, reserved by scripts/libvirtd.sh).
vm_dir=/var/tmp/hostagent-package-vm
vm_name=pkg-vm
vm_libvirt_uri="qemu+unix:///system?socket=$vm_dir/run-libvirt/libvirt-sock"
vm_wanted=0
vm_ready=0
nspawn_binds=()
qemu_pid=""
qemu_start=""
root_stack=""
package_guest() {
  HOSTAGENT_LIBVIRTD_URI="$vm_libvirt_uri" HOSTAGENT_PACKAGE_VM_DIR="$vm_dir" \
    "$tree/tests/packaging/package_guest" -tc="$1" 2>&1
}
# Before the boot: the binds, and the root's libvirtd told to make no cgroups (this machine's
# hierarchy is not the container's to change; systemd-nspawn gives it none of its own here).
prepare_vm() {
  if [[ ! -x $tree/tests/packaging/package_guest ]]; then
    skip_or_fail "vm through upgrade" "$tree/tests/packaging/package_guest is not built (a tree without tests)"
    return 0
  fi
  if ! mountpoint -q /dev/hugepages; then
    skip_or_fail "vm through upgrade" "no hugetlbfs at /dev/hugepages (scripts/libvirtd.sh mounts it)"
    return 0
  fi
  rm -rf "$vm_dir"
  mkdir -p "$vm_dir/run-libvirt"
  printf '\n# scripts/package.sh: a container with no cgroup hierarchy of its own\ncgroup_controllers = [ ]\n' \
    >>"$root/etc/libvirt/qemu.conf"
  nspawn_binds=("--bind=$vm_dir" "--bind=$vm_dir/run-libvirt:/run/libvirt" --bind=/dev/hugepages)
  vm_wanted=1
}
# Once booted: the root's libvirtd answers (socket-activated), and the guest's files, its pool and
# hostagentd's configuration are made for it.
ready_vm() {
  local output
  output="$(package_guest prepare)" || {
    echo "$output"
    in_target journalctl -u libvirtd.service -n 30 --no-pager || true
    fail "package_guest prepare on the root's libvirtd (above)"
  }
  if grep -q "SKIPPED: " <<<"$output"; then
    skip_or_fail "vm through upgrade" "$(grep -o 'SKIPPED: .*' <<<"$output" | head -1 | cut -c10-)"
    return 0
  fi
  sed -i "s|^  uri: .*\$|  uri: qemu:///system|" "$vm_dir/hostagent.yaml"
  root_stack="libvirt $(in_target libvirtd --version | awk '{print $NF}'), QEMU $(in_target qemu-system-x86_64 --version | awk 'NR==1 {print $4}')"
  echo "the root's own stack: $root_stack"
  vm_ready=1
}
# The guest's QEMU process as this machine sees it: "PID START".
qemu_process() {
  local pid
  pid="$(pgrep -f -- "guest=$vm_name," | head -1 || true)"
  [[ -n $pid ]] && echo "$pid $(ps -o lstart= -p "$pid")"
}
# hostagentd switched to the root's libvirtd, and a guest created through it, booted.
start_vm() {
  local i
  printf '[Service]\nExecStart=\nExecStart=/usr/sbin/hostagentd --config %s/hostagent.yaml\n' "$vm_dir" \
    >"$root/etc/systemd/system/hostagent.service.d/zz-root-libvirtd.conf"
  in_target systemctl daemon-reload
  in_target systemctl restart hostagent.service || {
    in_target journalctl -u hostagent.service -n 30 --no-pager || true
    fail "hostagent.service on the root's libvirtd did not start"
  }
  in_target hostagentctl vm create --template ci-guest --name "$vm_name" >"$out/vm-create.log" 2>&1 || {
    cat "$out/vm-create.log"
    fail "hostagentctl vm create under systemd"
  }
  for ((i = 0; i < 900; i++)); do
    grep -q "hostagent-test-guest: up " "$vm_dir/console/$vm_name.log" 2>/dev/null && break
    sleep 0.2
  done
  grep -q "hostagent-test-guest: up " "$vm_dir/console/$vm_name.log" ||
    fail "the guest did not come up in 180 s (its console: $vm_dir/console/$vm_name.log)"
  read -r qemu_pid qemu_start < <(qemu_process) || fail "no QEMU process for $vm_name"
  echo "$vm_name up: QEMU pid $qemu_pid, started $qemu_start"
}
# verify-guest on Debian 12's stack: this build's hostagentctl boots the Vela-2 8-GPU stand-in
# through the root's libvirtd (QEMU 7.2; SeaBIOS, as the root has no OVMF) and reads its ties back
# as on the current stack: the emulator and vCPU pins from QEMU's threads, each of the two cells'
# memory bound to its node, the 64-bit hole in the guest. Its work directory lies in vm_dir, which
# the container sees.
verified=""
verify_on_root() {
  local log="$out/verify-guest.log" ties
  "$tree/hostagent/hostagentctl" verify-guest --simulated vela2 --template gx3d-160x1792x8h100 \
    --housekeeping-cpus 0,1 --firmware bios --connect "$vm_libvirt_uri" --name pkg-verify \
    --work-dir "$vm_dir/verify" >"$log" 2>&1 || {
    cat "$log"
    fail "verify-guest through the root's libvirtd (above)"
  }
  sed -n '/^Ties held/,/^$/p' "$log"
  ties="$(grep -cE "^  (emulator: QEMU's main thread|vCPU [01]: its thread|cell [01]'s memory: bound to node|64-bit PCI hole: )" "$log" || true)"
  [[ $ties == 6 ]] || fail "verify-guest on the root's stack read back $ties of the 6 ties (log: $log)"
  verified="$(grep -o 'guest powered off [0-9.]* s after its start' "$log"); MATCH, the 6 ties held"
}
# HOSTAGENT_PACKAGE_BENCH_START=ROUNDS (not in CI: minutes): bench/bench_start on the root's
# libvirtd, so that its arms (two cells against one above all) are measured on Debian 12's QEMU
# 7.2 as `bench/run` measures them on this machine's.
bench_on_root() {
  local rounds="${HOSTAGENT_PACKAGE_BENCH_START:-}"
  [[ -n $rounds ]] || return 0
  [[ -x $tree/bench/bench_start ]] || fail "HOSTAGENT_PACKAGE_BENCH_START: $tree/bench/bench_start is not built"
  begin "bench_start on the root's stack"
  "$tree/bench/bench_start" "$rounds" --connect "$vm_libvirt_uri" --scratch-dir "$vm_dir" |
    grep -v '^<' | tee "$out/bench-start.log"
  end "bench_start on the root's stack" "$out/bench-start.log"
}
# After WHAT: the same QEMU process, and the new hostagentd adopted the VM at its start.
check_vm_kept() {
  local now adopted
  now="$(qemu_process || true)"
  [[ $now == "$qemu_pid $qemu_start" ]] ||
    fail "$1 changed the guest's QEMU process (pid $qemu_pid started $qemu_start; now: ${now:-none})"
  adopted="$(in_target hostagentctl status --json | python3 -c '
import json, sys
def find(value, key):
    if isinstance(value, dict):
        if key in value: return value[key]
        return next((found for found in map(lambda v: find(v, key), value.values()) if found is not None), None)
    return None
print(" ".join(find(json.load(sys.stdin), "adopted") or []))')"
  [[ " $adopted " == *" $vm_name "* ]] || fail "after $1 hostagentd did not adopt $vm_name (adopted: ${adopted:-none})"
  [[ "$(in_target hostagentctl vm show "$vm_name" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" == running ]] ||
    fail "after $1 hostagentd does not see $vm_name running"
  echo "after $1: QEMU pid $qemu_pid still, started $qemu_start; hostagentd adopted $vm_name"
}

# Under systemd: the API answers through the socket systemd made, the watchdog is on.
check_running() {
  in_target hostagentctl status >/dev/null || fail "hostagentctl status through the socket failed under systemd"
  local mode
  mode="$(in_target stat -c '%a %U:%G' /run/hostagent/hostagent.sock)"
  [[ $mode == "660 root:hostagent" ]] || fail "the socket systemd made is $mode, not 660 root:hostagent"
  [[ "$(unit_property hostagent.service WatchdogUSec)" == 30s ]] || fail "hostagent.service's WatchdogUSec is not 30s"
}

begin "debian 12 root"
root_origin=""
chroot_ok=1
sources=""
if [[ $EUID -ne 0 ]]; then
  skip_or_fail "debian 12 root" "not root: debootstrap and chroot need root"
  chroot_ok=0
elif ! command -v debootstrap >/dev/null; then
  skip_or_fail "debian 12 root" "debootstrap is not installed (scripts/install-deps.sh installs it)"
  chroot_ok=0
else
  trap on_exit EXIT
  if [[ -n ${HOSTAGENT_DEBIAN_MIRROR:-} ]]; then
    sources="$(printf '%s %s\n' "$HOSTAGENT_DEBIAN_MIRROR" "$suite")"
  else
    sources="$(debian_sources)"
  fi
  mirror="$(awk -v s="$suite" '$2 == s {print $1; exit}' <<<"$sources")"
  if [[ -z $mirror ]]; then
    skip_or_fail "debian 12 root" "no Debian $suite mirror in /etc/apt/sources.list* (set HOSTAGENT_DEBIAN_MIRROR)"
    chroot_ok=0
  elif ! prepare_root "$sources" "$mirror"; then
    unmount_root
    skip_or_fail "debian 12 root" "cannot reach the Debian mirror $mirror (no network?): no clean root to install into"
    chroot_ok=0
  else
    end "debian 12 root" "$root_origin"
  fi
fi

if ((chroot_ok)); then
  begin "install .deb"
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  # Not /tmp: the booted root mounts a tmpfs there.
  mkdir -p "$root/srv/package-sh"
  cp "$deb" "$root/srv/package-sh/"
  in_root apt-get install -y -q --no-install-recommends "/srv/package-sh/$(basename "$deb")" >"$out/apt-install.log" 2>&1 || {
    cat "$out/apt-install.log"
    fail "apt-get install of the .deb in the root"
  }
  grep -E '^(Setting up|Selecting) hostagent' "$out/apt-install.log" | head -2
  check_installed
  end "install .deb" "files, modes, group, conffile, units enabled and verified, both binaries run"

  prepare_vm
  begin "boot under systemd"
  boot_status=0
  if ! command -v systemd-nspawn >/dev/null; then
    skip_or_fail "boot under systemd" "systemd-nspawn is not installed (systemd-container; scripts/install-deps.sh installs it)"
  else
    boot_root || boot_status=$?
    if ((boot_status == 1)); then
      skip_or_fail "boot under systemd" "systemd-nspawn cannot boot the root here (log: $out/nspawn.log)"
      mount -t proc proc "$root/proc"
    elif ((boot_status != 0)); then
      fail "hostagent.service under systemd (above; the container's console: $out/nspawn.log)"
    else
      check_running
      end "boot under systemd" "READY=1 came (active), API answered through systemd's socket, watchdog on"
      ((vm_wanted)) && ready_vm
      if ((vm_ready)); then
        begin "vm on libvirtd"
        base="this build's release 1"
        if [[ -n $prev_deb ]]; then
          # Back to the previous release first: the VM is made under it.
          cp "$prev_deb" "$root/srv/package-sh/"
          in_target apt-get install -y -q --allow-downgrades "/srv/package-sh/$(basename "$prev_deb")" \
            >"$out/apt-prev.log" 2>&1 || {
            cat "$out/apt-prev.log"
            fail "apt-get install of the previous release's .deb"
          }
          base="$(in_target dpkg-query -W -f='${Version}' hostagent) (commit ${prev_commit:0:12})"
        fi
        start_vm
        end "vm on libvirtd" "$vm_name created under $base on the root's $root_stack, its guest up (QEMU pid $qemu_pid)"
        begin "verify-guest on the root's stack"
        verify_on_root
        end "verify-guest on the root's stack" "$verified"
      fi
    fi
  fi
  # From here the root runs systemd (maintainer scripts start, restart and stop for real), or, when
  # it could not boot, is a chroot (they only make links).
  where="with systemd running"
  [[ -n $container ]] || where="in the chroot"

  begin upgrade
  # The same version with release 2: a real upgrade (postinst configure with the old version).
  echo "# edited by scripts/package.sh: must survive the upgrade" >>"$root/etc/hostagent/hostagent.yaml"
  mkdir -p "$out/upgrade"
  cmake -DHOSTAGENT_PACKAGE_RELEASE=2 "$tree" >/dev/null
  cmake --build "$tree" --target hostagent_package_files >/dev/null
  cpack_into "$out/upgrade" DEB
  cmake -DHOSTAGENT_PACKAGE_RELEASE=1 "$tree" >/dev/null
  cmake --build "$tree" --target hostagent_package_files >/dev/null
  deb2="$(echo "$out"/upgrade/hostagent_*-2_amd64.deb)"
  cp "$deb2" "$root/srv/package-sh/"
  [[ -z $container ]] || old_pid="$(unit_property hostagent.service MainPID)"
  in_target apt-get install -y -q "/srv/package-sh/$(basename "$deb2")" >"$out/apt-upgrade.log" 2>&1 || {
    cat "$out/apt-upgrade.log"
    fail "apt-get install of the release-2 .deb (an upgrade) $where"
  }
  version="$(in_target dpkg-query -W -f='${Version}' hostagent)"
  [[ $version == *-2 ]] || fail "after the upgrade dpkg has hostagent $version"
  grep -q "must survive the upgrade" "$root/etc/hostagent/hostagent.yaml" || fail "the upgrade lost the conffile's edit"
  check_files "upgrade"
  echo "upgraded to $version $where; dpkg --verify: $(in_target dpkg --verify hostagent || true)"
  if [[ -n $container ]]; then
    # postinst try-restarted the running daemon: a new process, ready again.
    new_pid="$(unit_property hostagent.service MainPID)"
    [[ "$(unit_property hostagent.service ActiveState)" == active && $new_pid != "$old_pid" ]] ||
      fail "the upgrade did not restart hostagent.service (MainPID $old_pid, now $new_pid)"
    echo "hostagent.service restarted by the upgrade: MainPID $old_pid -> $new_pid"
    check_running
    [[ -z $qemu_pid ]] || check_vm_kept "the upgrade"
  fi
  end upgrade "to $version $where, the conffile's edit kept$([[ -z $container ]] || echo ', daemon restarted')$([[ -z $qemu_pid ]] || echo ', the VM ran on')"

  if [[ -n $qemu_pid ]]; then
    begin downgrade
    # Back to the release the VM was made under, over the running VM: the daemon restarted again,
    # the guest untouched.
    back="${prev_deb:-$deb}"
    old_pid="$(unit_property hostagent.service MainPID)"
    in_target apt-get install -y -q --allow-downgrades "/srv/package-sh/$(basename "$back")" >"$out/apt-downgrade.log" 2>&1 || {
      cat "$out/apt-downgrade.log"
      fail "apt-get install of $(basename "$back") over release 2 (a downgrade)"
    }
    version="$(in_target dpkg-query -W -f='${Version}' hostagent)"
    [[ $version == "$(dpkg-deb -f "$back" Version)" ]] || fail "after the downgrade dpkg has hostagent $version"
    new_pid="$(unit_property hostagent.service MainPID)"
    [[ "$(unit_property hostagent.service ActiveState)" == active && $new_pid != "$old_pid" ]] ||
      fail "the downgrade did not restart hostagent.service (MainPID $old_pid, now $new_pid)"
    check_vm_kept "the downgrade"
    in_target hostagentctl vm delete "$vm_name" >"$out/vm-delete.log" 2>&1 || {
      cat "$out/vm-delete.log"
      fail "hostagentctl vm delete after the downgrade"
    }
    [[ -z "$(qemu_process || true)" ]] || fail "$vm_name's QEMU still runs after its delete"
    end downgrade "to $version with $vm_name running: same QEMU process, adopted; then deleted"
    bench_on_root  # once the VM is gone: its pinned CPUs would be held
  fi

  begin "remove, purge"
  in_target apt-get remove -y -q hostagent >"$out/apt-remove.log" 2>&1 || {
    cat "$out/apt-remove.log"
    fail "apt-get remove hostagent $where"
  }
  [[ ! -e $root/usr/sbin/hostagentd ]] || fail "hostagentd is still there after remove"
  grep -q "must survive the upgrade" "$root/etc/hostagent/hostagent.yaml" || fail "remove took the conffile"
  status="$(in_target dpkg-query -W -f='${Status}' hostagent)"
  [[ $status == "deinstall ok config-files" ]] || fail "after remove dpkg says: $status"
  if [[ -n $container ]]; then
    for unit in hostagent.service hostagent.socket; do
      state="$(unit_property "$unit" ActiveState)"
      [[ $state == inactive ]] || fail "after remove $unit is $state, not stopped"
    done
  fi
  in_target apt-get purge -y -q hostagent >>"$out/apt-remove.log" 2>&1 || {
    cat "$out/apt-remove.log"
    fail "apt-get purge hostagent $where"
  }
  [[ ! -e $root/etc/hostagent ]] || fail "/etc/hostagent is still there after purge"
  [[ ! -e $root/var/log/hostagent ]] || fail "/var/log/hostagent is still there after purge"
  for link in multi-user.target.wants/hostagent.service sockets.target.wants/hostagent.socket \
    paths.target.wants/hostagent-initramfs.path; do
    [[ ! -L $root/etc/systemd/system/$link ]] || fail "purge left /etc/systemd/system/$link"
  done
  end "remove, purge" "$where: remove stopped it and kept the conffile; purge took /etc/hostagent and the links"

  begin cleanup
  stop_container
  unmount_root
  if [[ ${HOSTAGENT_PACKAGE_KEEP_ROOT:-0} != 1 ]]; then remove_root; fi
  end cleanup "container stopped, root removed (HOSTAGENT_PACKAGE_KEEP_ROOT=1 keeps it)"
fi

print_summary
echo "package.sh: packages in $out"
