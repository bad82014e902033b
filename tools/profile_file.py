"""Writing a profile the way the profile tools under tools/ share: sorted keys, two-space indent, a final newline,
written to a temporary file beside it and moved over it, so that no half-written profile is ever left."""
import json
import os


def write_profile(profile, path):
    temporary = path + ".tmp"
    with open(temporary, "w") as f:
        json.dump(profile, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(temporary, path)
