#!/usr/bin/env bash
# install.sh — build mq with the local Go toolchain and install its programs
# and man pages under PREFIX (default /usr/local for root, ~/.local otherwise).
#
#   ./install.sh               build and install
#   ./install.sh --uninstall   remove what install put there
#   PREFIX=/opt/mq ./install.sh
#
# Running it twice leaves the same result as running it once.
set -euo pipefail
cd "$(dirname "$0")"

if [ -z "${PREFIX:-}" ]; then
	if [ "$(id -u)" -eq 0 ]; then PREFIX=/usr/local; else PREFIX="$HOME/.local"; fi
fi
bindir="$PREFIX/bin"
mandir="$PREFIX/share/man"

programs() { for d in cmd/*/; do [ -f "$d/main.go" ] && basename "$d"; done; }

case "${1:-}" in
--uninstall)
	for p in $(programs); do
		if [ -e "$bindir/$p" ]; then rm -f "$bindir/$p"; echo "removed $bindir/$p"; fi
	done
	for page in man/*.[0-9]; do
		[ -e "$page" ] || continue
		sec="${page##*.}"
		target="$mandir/man$sec/$(basename "$page")"
		if [ -e "$target" ]; then rm -f "$target"; echo "removed $target"; fi
	done
	exit 0
	;;
"") ;;
-h|--help)
	sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "install.sh: unknown argument $1 (try --help)" >&2
	exit 2
	;;
esac

command -v go >/dev/null || { echo "install.sh: go not found in PATH" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The release the programs report (lib/version): the latest tag and the
# commits since, else the Go toolchain's pseudo-version of the commit.
version=${VERSION:-$(git describe --tags --dirty 2>/dev/null || true)}
ldflags=""
if [ -n "$version" ]; then ldflags="-X github.com/mqproject/mq/lib/version.stamp=$version"; fi
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" ./cmd/...
mkdir -p "$bindir"
for p in $(programs); do
	install -m 0755 "$tmp/$p" "$bindir/$p"
	echo "installed $bindir/$p"
done
for page in man/*.[0-9]; do
	[ -e "$page" ] || continue
	sec="${page##*.}"
	mkdir -p "$mandir/man$sec"
	install -m 0644 "$page" "$mandir/man$sec/$(basename "$page")"
	echo "installed $mandir/man$sec/$(basename "$page")"
done
case ":$PATH:" in *":$bindir:"*) ;; *) echo "note: $bindir is not in PATH" ;; esac
