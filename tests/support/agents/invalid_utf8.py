"""Emit invalid UTF-8 bytes (on stdout and stderr) mixed with an answer; exit 0."""

import sys

OUTPUT = (
    b"\xff\xfe progress \xc3\x28 50%\n"  # bad start bytes, a broken 2-byte sequence
    b"p: TECHLEAD\n"
    b"v: CONDITIONAL\n"
    b"i:\n"
    b"  - H: caf\xe9 is Latin-1, not UTF-8\n"  # a lone Latin-1 byte inside the answer
    b"\xed\xa0\x80 trailing surrogate \xf0\x9f\n"  # encoded surrogate, truncated 4-byte
)

if __name__ == "__main__":
    sys.stdout.buffer.write(OUTPUT)
    sys.stdout.buffer.flush()
    sys.stderr.buffer.write(b"warning: \xff\xff bad bytes on stderr too\n")
    sys.stderr.buffer.flush()
