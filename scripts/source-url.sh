#!/bin/sh
# Prints the repository's web address for an image's org.opencontainers.image.source label:
# ROBOTSGUARD_SOURCE, else the git remote `origin`, when it is a URL a browser opens (an scp-style
# git@host:owner/repo becomes https://host/owner/repo; user names and tokens are dropped, as is a
# trailing .git). Prints nothing for a remote that is a path (a clone of a local clone) or when
# there is none: the label is then left out rather than naming a directory of the build machine.
set -eu
url=${ROBOTSGUARD_SOURCE:-$(git remote get-url origin 2>/dev/null || true)}
case $url in
    https://* | http://*) ;;
    ssh://*) url="https://${url#ssh://}" ;;
    git@*:*) url="https://$(printf '%s' "${url#git@}" | sed 's#:#/#')" ;;
    *) url= ;;
esac
[ -n "$url" ] || exit 0
# Credentials (https://user:token@host/...) and a port-less ssh user (git@host) never reach a label.
url=$(printf '%s' "$url" | sed -E 's#^(https?://)[^/@]*@#\1#; s#\.git$##; s#/$##')
case $url in
    http*://*/*) printf '%s\n' "$url" ;;
esac
