#!/bin/bash
# `make series`: the mail series, made with b4 (scripts/mail.py write): one
# directory per series of patches/mail-series in build/series/<name>/,
# cover letter and patches as .eml files, and build/series/series.json.
# Then scripts/test-mail.py reads them back: subjects, prefixes, From,
# trailers, To/Cc against get_maintainer.pl, base-commit, no invented
# identity, checkpatch.pl --strict, and `git am` of each series with its
# dependencies onto the base giving the tree of those commits of
# build/linux. Prints TAP. Nothing is sent (README, "How to send").
#
# The mails carry the sender's identity (git config user.name/user.email);
# make series refuses an unset or invented one, and a sender who has not
# decided the Assisted-by: trailer (git config revoke.assistedBy: the
# value, or none). The test step of `make test` sets MAIL_TEST_IDENTITY (an
# example.org address that can never be mailed) and MAIL_TEST_ASSISTED_BY,
# writes to build/test-mail/series and adds the negative controls
# (MAIL_NEGATIVE=1).
#
# usage: scripts/series-check.sh [OUT]
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$top/build/series}")
defs=${MAIL_SERIES:-$top/patches/mail-series}
if ! python3 "$top/scripts/mail.py" write --defs "$defs" --out "$out" >&2; then
	printf 'TAP version 13\n1..1\nnot ok 1 mail.py write: the mail series (see above)\n'
	exit 1
fi
neg=--no-negative
[ "${MAIL_NEGATIVE:-}" != 1 ] || neg=
python3 "$top/scripts/test-mail.py" --defs "$defs" --out "$out" $neg
