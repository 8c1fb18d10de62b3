#!/usr/bin/env bash
# Man pages and shell completions from the command definitions, for `make
# install` (and so the Debian package): swift-argument-parser's manual
# generator, the tool behind its `generate-manual` plugin, run on the very
# binary installed (the plugin itself would first build every product of
# the package again, in release unless told otherwise: too slow for CI), and
# `siwa --generate-completion-script` for bash, zsh and fish.
#
#   scripts/generate-manual.sh BINARY OUTDIR
# writes OUTDIR/man1/siwa.1 and siwa-SUBCOMMAND.1 ... (gzipped, as Debian
# wants them), OUTDIR/completions/{siwa.bash,_siwa,siwa.fish}.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=$(realpath "$1") out=$2
# The argument parser's sources, as SwiftPM checked them out for this
# package (the version Package.resolved pins); resolved if not yet.
checkout=""
for candidate in .build/checkouts/swift-argument-parser .build-static/checkouts/swift-argument-parser; do
    if [[ -f $candidate/Package.swift ]]; then checkout=$candidate; break; fi
done
if [[ -z $checkout ]]; then
    swift package resolve >&2
    checkout=.build/checkouts/swift-argument-parser
fi
# Its own scratch folder: the tool and the argument parser only, built once.
tool_build=.build/manual-tool
swift build --package-path "$checkout" --scratch-path "$tool_build" --product generate-manual >&2
tool=$(swift build --package-path "$checkout" --scratch-path "$tool_build" --product generate-manual --show-bin-path)/generate-manual

# The pages' date: the commit's, so that the same sources make the same pages.
date=$(git log -1 --format=%cs 2>/dev/null || date -u +%F)
rm -rf "$out/man1" "$out/completions"
mkdir -p "$out/man1" "$out/completions"
"$tool" "$binary" --multi-page --date "$date" --section 1 --output-directory "$out/man1"
# A blank line in a command's discussion is a paragraph: mdoc's .Pp (groff
# warns of an empty input line otherwise).
# A subcommand's page is named `siwa audit list` in its NAME section, which
# whatis databases (mandb's lexgrog, lintian's bad-whatis-entry) cannot
# parse: NAME gets the page's own name, siwa.audit.list, and the synopsis
# keeps the command as typed.
for page in "$out"/man1/*.1; do
    sed -i 's/^$/.Pp/' "$page"
    name=$(sed -n '/^\.Sh NAME$/{n;s/^\.Nm "\(.*\)"$/\1/p;}' "$page")
    if [[ $name == *" "* ]]; then
        sed -i -e "/^\.Sh NAME\$/{n;s/^\.Nm .*/.Nm ${name// /.}/;}" -e "s/^\.Nm\$/.Nm \"$name\"/" "$page"
    fi
    gzip -9n "$page"
done
# bash-completion sources the file: no #! line.
"$binary" --generate-completion-script bash | sed '1{/^#!/d}' > "$out/completions/siwa.bash"
"$binary" --generate-completion-script zsh > "$out/completions/_siwa"
"$binary" --generate-completion-script fish > "$out/completions/siwa.fish"
ls "$out/man1" | wc -l | sed 's/^/man pages: /' >&2
