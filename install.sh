#!/usr/bin/env bash
# install.sh — build mq with the local Go toolchain and install its programs
# and man pages under PREFIX (default /usr/local for root, ~/.local otherwise).
#
#   ./install.sh               build and install
#   ./install.sh --systemd     the same, and the systemd units mqd.service and
#                              mqd@.service (/etc/systemd/system), the user mq
#                              (/etc/sysusers.d/mq.conf) and, when there is
#                              none, /etc/mq/mqd.conf; as root, it creates the
#                              user and reloads systemd (docs/operations.md)
#   ./install.sh --uninstall   remove what install put there: programs, man
#                              pages, units, the sysusers file, an unchanged
#                              /etc/mq/mqd.conf (never /var/lib/mq nor the user)
#   PREFIX=/opt/mq ./install.sh
#   DESTDIR=/tmp/root ./install.sh --systemd   stage every file under DESTDIR
#                              (for packaging; touches nothing outside it)
#   PREBUILT=bin ./install.sh  install the programs built there (make build)
#                              instead of building them
#
# Running it twice leaves the same result as running it once.
set -euo pipefail
cd "$(dirname "$0")"
self=$(basename "$0")

destdir=${DESTDIR:-}
systemd=false
uninstall=false
for arg in "$@"; do
	case "$arg" in
	--systemd) systemd=true ;;
	--uninstall) uninstall=true ;;
	-h|--help)
		sed -n '2,20p' "$self" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "install.sh: unknown argument $arg (try --help)" >&2
		exit 2
		;;
	esac
done

if [ -z "${PREFIX:-}" ]; then
	if [ "$(id -u)" -eq 0 ] || [ -n "$destdir" ] || $systemd; then PREFIX=/usr/local; else PREFIX="$HOME/.local"; fi
fi
bindir="$PREFIX/bin"
mandir="$PREFIX/share/man"
unitdir=/etc/systemd/system
units="mqd.service mqd@.service"
sysusers=/etc/sysusers.d/mq.conf
conf=/etc/mq/mqd.conf

# live: the files go to the running system (no DESTDIR), as root, with
# systemd running: then the user is created and systemd reloaded.
live=false
if [ -z "$destdir" ] && [ "$(id -u)" -eq 0 ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
	live=true
fi
if $systemd && [ -z "$destdir" ] && [ "$(id -u)" -ne 0 ]; then
	echo "install.sh: --systemd installs system units: run it as root, or set DESTDIR" >&2
	exit 1
fi

programs() { for d in cmd/*/; do [ -f "$d/main.go" ] && basename "$d"; done; }

remove() {
	if [ -e "$destdir$1" ]; then rm -f "$destdir$1"; echo "removed $destdir$1"; fi
}

if $uninstall; then
	if $live; then
		# Units must not vanish under a running or enabled node.
		busy=$(systemctl list-units --all --plain --no-legend --state=active,activating,deactivating,reloading 'mqd.service' 'mqd@*.service' | awk '{print $1}')
		busy="$busy $(find "$unitdir" -path '*.wants/*' \( -name mqd.service -o -name 'mqd@*.service' \) -exec basename {} \; 2>/dev/null | sort -u)"
		if [ -n "${busy// /}" ]; then
			echo "install.sh: still running or enabled:" $busy "— systemctl disable --now those first" >&2
			exit 1
		fi
	fi
	for p in $(programs); do remove "$bindir/$p"; done
	for page in man/*.[0-9]; do
		[ -e "$page" ] || continue
		remove "$mandir/man${page##*.}/$(basename "$page")"
	done
	reload=false
	for u in $units; do
		[ -e "$destdir$unitdir/$u" ] && reload=true
		remove "$unitdir/$u"
	done
	remove "$sysusers"
	# The sample config goes only when nobody changed it.
	if [ -e "$destdir$conf" ] && cmp -s deploy/systemd/mqd.conf "$destdir$conf"; then
		remove "$conf"
		rmdir "$destdir/etc/mq" 2>/dev/null || true
	fi
	if $live && $reload; then systemctl daemon-reload; fi
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${PREBUILT:-}" ]; then
	for p in $(programs); do
		[ -x "$PREBUILT/$p" ] || { echo "install.sh: no program $PREBUILT/$p (PREBUILT)" >&2; exit 1; }
		cp "$PREBUILT/$p" "$tmp/$p"
	done
else
	command -v go >/dev/null || { echo "install.sh: go not found in PATH" >&2; exit 1; }
	# The release the programs report (lib/version): the latest tag and the
	# commits since, else the commit's abbreviated hash.
	version=${VERSION:-$(git describe --tags --dirty --always 2>/dev/null || true)}
	ldflags=""
	if [ -n "$version" ]; then ldflags="-X github.com/mqproject/mq/lib/version.stamp=$version"; fi
	CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" ./cmd/...
fi
mkdir -p "$destdir$bindir"
for p in $(programs); do
	install -m 0755 "$tmp/$p" "$destdir$bindir/$p"
	echo "installed $destdir$bindir/$p"
done
for page in man/*.[0-9]; do
	[ -e "$page" ] || continue
	sec="${page##*.}"
	mkdir -p "$destdir$mandir/man$sec"
	install -m 0644 "$page" "$destdir$mandir/man$sec/$(basename "$page")"
	echo "installed $destdir$mandir/man$sec/$(basename "$page")"
done

if $systemd; then
	mkdir -p "$destdir$unitdir"
	for u in $units; do
		# The units run mqd from where it was just installed.
		sed "s|/usr/local/bin/mqd|$bindir/mqd|g" "deploy/systemd/$u" >"$tmp/$u"
		install -m 0644 "$tmp/$u" "$destdir$unitdir/$u"
		echo "installed $destdir$unitdir/$u"
	done
	mkdir -p "$destdir$(dirname "$sysusers")"
	install -m 0644 deploy/systemd/mq.sysusers "$destdir$sysusers"
	echo "installed $destdir$sysusers"
	if [ ! -e "$destdir$conf" ]; then
		mkdir -p "$destdir$(dirname "$conf")"
		install -m 0644 deploy/systemd/mqd.conf "$destdir$conf"
		echo "installed $destdir$conf"
	fi
	if $live; then
		systemd-sysusers "$sysusers"
		systemctl daemon-reload
		echo "start it with: systemctl enable --now mqd (or mqd@1 mqd@2 ... with /etc/mq/mqd-N.conf)"
	elif [ -z "$destdir" ]; then
		echo "note: systemd is not running here: create the user with systemd-sysusers $sysusers, then systemctl daemon-reload"
	fi
fi
if [ -z "$destdir" ]; then
	case ":$PATH:" in *":$bindir:"*) ;; *) echo "note: $bindir is not in PATH" ;; esac
fi
