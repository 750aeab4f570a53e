"""Print an answer without a final newline and exit 0."""

import sys

if __name__ == "__main__":
    sys.stdout.write("p: QA\nv: GO\ni: []")
    sys.stdout.flush()
