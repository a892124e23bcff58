#!/usr/bin/env python3
"""Fails when the top README's C example differs from engine/api/examples/echo.c, the file
the capi and install suites build: what the README shows is what the tests compile.

  readme_example.py README.md engine/api/examples/echo.c
"""
import sys


def main():
    readme, example = sys.argv[1], sys.argv[2]
    text = open(readme, encoding="utf-8").read()
    want = open(example, encoding="utf-8").read()
    blocks = [b.split("```", 1)[0] for b in text.split("```c\n")[1:]]
    if want in blocks:
        print(f"{readme} shows {example} as it is")
        return 0
    print(f"FAIL: no ```c block of {readme} is {example} as it is; copy the file into it")
    return 1


if __name__ == "__main__":
    sys.exit(main())
