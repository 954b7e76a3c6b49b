#!/usr/bin/env python3
"""Validate JUnit files against junit.xsd beside this file (the JUnit format
as Jenkins, GitLab and GitHub's report actions read it, written for these
tests) with xmlschema, a maintained XSD 1.0/1.1 validator (pinned in
requirements.txt). Run with the venv venv.sh makes:

    VENV/bin/python ci/test/junit.py FILE...          # validate each
    VENV/bin/python ci/test/junit.py --names FILE     # and print its test
                                                      # cases, one a line:
                                                      # classname<TAB>name<TAB>failed

Exit status 0 when every file is valid; each problem is printed.
"""
import os
import sys
import xml.etree.ElementTree as ET

import xmlschema

XSD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "junit.xsd")


def main(argv):
    names = argv[:1] == ["--names"]
    files = argv[1:] if names else argv
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    schema = xmlschema.XMLSchema10(XSD)
    bad = 0
    for path in files:
        errors = list(schema.iter_errors(path))
        if errors:
            bad += 1
            print(f"INVALID {path}")
            for e in errors[:10]:
                print(f"  {e.reason} at {e.path}")
            continue
        if names:
            for case in ET.parse(path).getroot().iter("testcase"):
                failed = "failed" if case.find("failure") is not None else "passed"
                print(f"{case.get('classname')}\t{case.get('name')}\t{failed}")
        else:
            print(f"valid   {path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
