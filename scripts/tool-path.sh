# Sourced by scripts/kube-paths.sh and scripts/helm-paths.sh: where a tool
# built from a pinned Go module is cached. Each build is named after the
# version its tools module pins and a hash of that module's go.sum, so a
# change of version builds a new one. Run from the repository root.

cache=${SPARECAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sparecap}

# path NAME TOOLS-DIR MODULE [RECIPE]: RECIPE names how the binary is built
# when that is not all in go.sum (e.g. version stamps in its ldflags); it is
# hashed after go.sum, so a new recipe builds a new binary.
path() {
	local version sum
	# `require MODULE vX` on one line, or `MODULE vX` inside a require block.
	version=$(awk -v m="$3" '($1 == "require" && $2 == m) { print $3; exit }
		($1 == m && $2 ~ /^v/) { print $2; exit }' "tools/$2/go.mod")
	if [ -z "$version" ]; then
		echo "tools/$2/go.mod does not require $3" >&2
		exit 1
	fi
	sum=$({ cat "tools/$2/go.sum"; printf %s "${4:-}"; } | sha256sum | cut -c1-12)
	echo "$cache/$1-$version-$sum"
}
