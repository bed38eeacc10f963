#!/usr/bin/env bash
# Makes the annotated tag of every release listed in RELEASES that this clone lacks (a clone does
# not always carry tags: CI's has none), dated as the release, so that `git describe`, `robotsguard
# --version` and scripts/release.sh see them. A tag that exists must point at the listed commit.
#
#   scripts/tag-releases.sh          # then: git push --tags (if you maintain the repository)
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
while read -r tag commit date _; do
    case "$tag" in ''|'#'*) continue ;; esac
    if ! [[ "$tag" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ && "$commit" =~ ^[0-9a-f]{40}$ && "$date" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]]; then
        echo "tag-releases: RELEASES: bad line: $tag $commit $date" >&2
        exit 1
    fi
    if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
        echo "tag-releases: $tag: commit $commit is not in this clone (a shallow clone? git fetch --unshallow)" >&2
        status=1
        continue
    fi
    if existing=$(git rev-parse -q --verify "refs/tags/$tag^{commit}"); then
        if [ "$existing" != "$commit" ]; then
            echo "tag-releases: $tag points at $existing, RELEASES says $commit" >&2
            status=1
        fi
        continue
    fi
    GIT_COMMITTER_DATE="$date 00:00:00 +0000" git tag -a "$tag" "$commit" -m "robotsguard ${tag#v}"
    echo "tag-releases: tagged $tag at ${commit:0:12}"
done <RELEASES
exit "$status"
