"""Who may include whom: checks every `#include` in src/ and bench/ against the module map in
docs/ARCHITECTURE.md, and that map's "depends on" column against the CMake files.

    /usr/bin/python3 tests/guards/check_layers.py               # the repository (ctest: guards.layers)
    /usr/bin/python3 tests/guards/check_layers.py --self-test   # checks the checker (guards.layers_selftest)

Why it exists: every target puts src/ on one PUBLIC include path, so a header-only include across
layers (rl including "mesh/codec.h" and using only its inline parts) compiles and links. CMake's
target_link_libraries decides what links; this test decides what is included.

The table (the first one under "## Module map" in docs/ARCHITECTURE.md), one row per CMake library:
  - "library": the target name (`meshrl_rl`; the binary is `meshrl (binary)`);
  - "folder": which files the library owns. `src/web` alone: every file of that folder that no
    other row names; `src/web (report, state_json)` or `src/model/safetensors.*, config.*`: those
    stems only (.h and .cpp);
  - "depends on": comma-separated; a name that is a library of the table without its `meshrl_`
    prefix (`core`, `update_format`, `web_ledger`) is a dependency, anything else (libtorch, zstd)
    is an external library and not checked; text in parentheses is commentary.
A library may include its own headers and those of everything it depends on, directly or
through others (target_link_libraries is transitive, and so is this). The "depends on" list must
name exactly the meshrl_* libraries its target_link_libraries call names (src/*/CMakeLists.txt,
bench/, proto/), so adding a link is also adding it to the table.

Generated protobuf headers ("meshrl.pb.h", "meshrl.grpc.pb.h") belong to the row whose folder is
proto/. A bare include ("bench_common.h") is resolved next to the including file, then in bench/.
"""

import os
import re
import subprocess
import sys
import tempfile

TABLE_FILE = "docs/ARCHITECTURE.md"
TABLE_SECTION = "## Module map"
CMAKE_DIRS = ("src", "bench", "proto")
# Targets of the CMake files that are not layers: the shared precompiled header every torch
# target links (it holds only libtorch).
NOT_LAYERS = {"meshrl_torch_pch"}
SOURCE_EXT = (".h", ".cpp")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
LINK_RE = re.compile(r"target_link_libraries\(\s*(meshrl\w*)\b([^)]*)\)", re.S)
TARGET_RE = re.compile(r"\bmeshrl(?:_\w+)?\b")


class TableError(Exception):
    pass


def strip_parens(text):
    return re.sub(r"\([^)]*\)", "", text)


def parse_table(root):
    """-> list of rows {name, line, folder_items, deps_text}. Raises TableError."""
    path = os.path.join(root, TABLE_FILE)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == TABLE_SECTION)
    except StopIteration:
        raise TableError(f"{TABLE_FILE}: no '{TABLE_SECTION}' section")
    header = None
    rows = []
    for i in range(start + 1, len(lines)):
        l = lines[i].strip()
        if l.startswith("## "):
            break
        if not l.startswith("|"):
            if header is not None and rows:
                break
            continue
        cells = [c.strip() for c in l.strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
            for col in ("library", "folder", "depends on"):
                if col not in header:
                    raise TableError(f"{TABLE_FILE}:{i + 1}: the module map needs a '{col}' column")
            continue
        if set(l.replace("|", "").strip()) <= set("-: "):
            continue  # the |---| line
        cell = dict(zip(header, cells))
        rows.append({"name": cell["library"].split()[0].strip("`"), "line": i + 1,
                     "folder": cell["folder"], "deps_text": cell["depends on"]})
    if not rows:
        raise TableError(f"{TABLE_FILE}: no table under '{TABLE_SECTION}'")
    return rows


def short(name):
    return name[len("meshrl_"):] if name.startswith("meshrl_") else name


def parse_folder(cell, where):
    """'src/web (a, b)' | 'src/model/a.*, b.*' | 'src/web' -> list of (folder, stem or None)."""
    out = []
    folder = None
    for m in re.finditer(r"([^,(]+)(\(([^)]*)\))?", cell):
        item = m.group(1).strip().strip("`")
        if not item:
            continue
        if m.group(3) is not None:  # folder (stem, stem)
            folder = item.rstrip("/")
            for stem in m.group(3).split(","):
                if stem.strip():
                    out.append((folder, stem.strip().strip("`")))
        elif item.endswith(".*"):
            if "/" in item:
                folder, stem = item[:-2].rsplit("/", 1)
            elif folder is None:
                raise TableError(f"{where}: '{item}' needs a folder before it")
            else:
                stem = item[:-2]
            out.append((folder, stem))
        else:
            folder = item.rstrip("/")
            out.append((folder, None))
    if not out:
        raise TableError(f"{where}: empty folder cell")
    return out


def cmake_links(root):
    """-> {target: set of meshrl targets it links}, from every target_link_libraries call."""
    links = {}
    for top in CMAKE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if "CMakeLists.txt" not in files:
                continue
            with open(os.path.join(dirpath, "CMakeLists.txt"), encoding="utf-8") as f:
                text = re.sub(r"#[^\n]*", "", f.read())
            for target in re.findall(r"add_(?:library|executable)\(\s*(meshrl\w*)\b", text):
                links.setdefault(target, set())
            for m in LINK_RE.finditer(text):
                deps = set(TARGET_RE.findall(m.group(2))) - {m.group(1)}
                links.setdefault(m.group(1), set()).update(deps)
    return {t: d - NOT_LAYERS for t, d in links.items() if t not in NOT_LAYERS}


class Layers:
    def __init__(self, root):
        self.root = root
        self.rows = parse_table(root)
        self.by_name = {}
        for r in self.rows:
            if r["name"] in self.by_name:
                raise TableError(f"{TABLE_FILE}:{r['line']}: {r['name']} has two rows")
            self.by_name[r["name"]] = r
        shorts = {short(n): n for n in self.by_name}
        for r in self.rows:
            where = f"{TABLE_FILE}:{r['line']}"
            r["owns"] = parse_folder(r["folder"], where)
            r["deps"] = set()
            for tok in strip_parens(r["deps_text"]).split(","):
                tok = tok.strip().strip("`")
                if tok in shorts and shorts[tok] != r["name"]:
                    r["deps"].add(shorts[tok])
        self.stems = {}    # (folder, stem) -> row name
        self.folders = {}  # folder -> row name (the rest of the folder)
        for r in self.rows:
            for folder, stem in r["owns"]:
                table = self.folders if stem is None else self.stems
                key = folder if stem is None else (folder, stem)
                if key in table:
                    raise TableError(f"{TABLE_FILE}:{r['line']}: {key} is also claimed by {table[key]}")
                table[key] = r["name"]
                if not os.path.isdir(os.path.join(self.root, folder)):
                    raise TableError(f"{TABLE_FILE}:{r['line']}: folder {folder} does not exist")

    def closure(self, name):
        seen, todo = set(), [name]
        while todo:
            for d in self.by_name[todo.pop()]["deps"]:
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        return seen

    def owner(self, relpath):
        """The row owning a file path relative to the root, or None."""
        folder, base = os.path.split(relpath)
        stem = os.path.splitext(base)[0]
        return self.stems.get((folder, stem)) or self.folders.get(folder)

    def proto_row(self):
        return self.folders.get("proto")


def check_cmake(layers):
    errors = []
    links = cmake_links(layers.root)
    for r in layers.rows:
        if r["name"] not in links:
            errors.append(f"{TABLE_FILE}:{r['line']}: {r['name']} is not a target of any CMakeLists.txt "
                          f"under {', '.join(CMAKE_DIRS)}")
            continue
        want = links[r["name"]]
        if r["deps"] != want:
            missing, extra = sorted(want - r["deps"]), sorted(r["deps"] - want)
            msg = f"{TABLE_FILE}:{r['line']}: {r['name']}'s 'depends on' differs from its target_link_libraries:"
            if missing:
                msg += f" add {', '.join(short(x) for x in missing)}"
            if extra:
                msg += f"{';' if missing else ''} remove {', '.join(short(x) for x in extra)}"
            errors.append(msg)
    for t in sorted(set(links) - set(layers.by_name)):
        errors.append(f"CMake target {t} has no row in {TABLE_FILE}'s module map: add one")
    return errors


def source_files(layers):
    tops = sorted({f.split("/")[0] for f in layers.folders} | {f.split("/")[0] for f, _ in layers.stems})
    for top in tops:
        for dirpath, dirs, files in os.walk(os.path.join(layers.root, top)):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(SOURCE_EXT):
                    yield os.path.relpath(os.path.join(dirpath, f), layers.root)


def included_owner(layers, relpath, inc):
    """The row owning what `#include "inc"` in relpath names, or None for a header outside ours."""
    if re.fullmatch(r"[\w.]+\.pb\.h", inc):
        return layers.proto_row()
    if "/" in inc:
        top = inc.split("/")[0]
        for base in ("src",):
            if os.path.isdir(os.path.join(layers.root, base, top)):
                return layers.owner(os.path.join(base, inc))
        return None
    here = os.path.join(os.path.dirname(relpath), inc)
    if os.path.exists(os.path.join(layers.root, here)):
        return layers.owner(here)
    if os.path.exists(os.path.join(layers.root, "bench", inc)):
        return layers.owner(os.path.join("bench", inc))
    return None


def check_includes(layers):
    errors = []
    closures = {n: layers.closure(n) for n in layers.by_name}
    for rel in source_files(layers):
        me = layers.owner(rel)
        if me is None:
            if rel.startswith("src/"):
                errors.append(f"{rel}: belongs to no library of {TABLE_FILE}'s module map")
            continue
        with open(os.path.join(layers.root, rel), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                other = included_owner(layers, rel, m.group(1))
                if other is None or other == me or other in closures[me]:
                    continue
                errors.append(f"{rel}:{n}: forbidden include \"{m.group(1)}\": {me} -> {other}, "
                              f"but {me} does not depend on {other} ({TABLE_FILE} module map)")
    return errors


def check(root):
    try:
        layers = Layers(root)
    except (TableError, OSError) as e:
        return [str(e)]
    return check_cmake(layers) + check_includes(layers)


def main(argv):
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    if "--root" in argv:
        root = argv[argv.index("--root") + 1]
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} problem(s). A new dependency goes into the CMake file and "
              f"the module map together; an include across layers that is not a dependency is a bug.")
        return 1
    layers = Layers(root)
    print(f"check_layers: {len(layers.rows)} libraries, every include in {sum(1 for _ in source_files(layers))} "
          f"files follows {TABLE_FILE}'s module map, and the map matches target_link_libraries")
    return 0


# ----------------------------------------------------------------------------- self-test

SELFTEST_TABLE = """# test

## Module map

| library | folder | depends on | owns |
|---|---|---|---|
| meshrl_low | src/low | — (nothing) | base |
| meshrl_wire | src/mid/wire.* | low, zstd | a torch-free part |
| meshrl_mid | src/mid | wire, low (status only), libtorch | middle |
| meshrl_proto | proto/ | grpc++ | messages |
| meshrl_top | src/top | mid, proto | top |

## Next section
"""

SELFTEST_FILES = {
    "src/low/CMakeLists.txt": "add_library(meshrl_low STATIC a.cpp)\n",
    "src/mid/CMakeLists.txt": "add_library(meshrl_wire STATIC wire.cpp)\ntarget_link_libraries(meshrl_wire PUBLIC meshrl_low)\n"
                              "add_library(meshrl_mid STATIC m.cpp)\n"
                              "target_link_libraries(meshrl_mid PUBLIC meshrl_wire meshrl_low\n  PRIVATE zstd)  # not meshrl_top\n",
    "src/top/CMakeLists.txt": "add_library(meshrl_top STATIC t.cpp)\ntarget_link_libraries(meshrl_top PUBLIC meshrl_mid meshrl_proto)\n",
    "proto/CMakeLists.txt": "add_library(meshrl_proto STATIC x.cc)\n",
    "src/low/a.h": "#pragma once\n#include <vector>\n",
    "src/low/a.cpp": '#include "low/a.h"\n',
    "src/mid/wire.h": '#include "low/a.h"\n',
    "src/mid/m.h": '#include "mid/wire.h"\n#include "low/a.h"\n',
    "src/top/t.cpp": '#include "mid/m.h"\n#include "low/a.h"  // through mid\n#include "meshrl.pb.h"\n',
}


def run_on(files, table):
    with tempfile.TemporaryDirectory(prefix="check-layers-") as d:
        for rel, text in dict(SELFTEST_FILES, **files).items():
            if text is None:
                continue
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        os.makedirs(os.path.join(d, "docs"))
        with open(os.path.join(d, TABLE_FILE), "w") as f:
            f.write(table)
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--root", d],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


def self_test():
    cases = [
        ("a clean tree passes", {}, SELFTEST_TABLE, 0, ["follows"]),
        ("a header-only include upwards fails, naming file:line and the edge",
         {"src/low/bad.h": '#pragma once\n\n#include "top/t.h"\n', "src/top/t.h": ""}, SELFTEST_TABLE, 1,
         ['src/low/bad.h:3: forbidden include "top/t.h": meshrl_low -> meshrl_top']),
        ("the torch-free part may not include the rest of its own folder",
         {"src/mid/wire.cpp": '#include "mid/wire.h"\n#include "mid/m.h"\n'}, SELFTEST_TABLE, 1,
         ["src/mid/wire.cpp:2:", "meshrl_wire -> meshrl_mid"]),
        ("generated protobuf headers belong to proto/",
         {"src/mid/m.cpp": '#include "meshrl.grpc.pb.h"\n'}, SELFTEST_TABLE, 1, ["meshrl_mid -> meshrl_proto"]),
        ("a link missing from the table fails",
         {"src/top/CMakeLists.txt": "add_library(meshrl_top STATIC t.cpp)\n"
                                    "target_link_libraries(meshrl_top PUBLIC meshrl_mid meshrl_proto meshrl_low)\n"},
         SELFTEST_TABLE, 1, ["meshrl_top's 'depends on' differs", "add low"]),
        ("a dependency the CMake files do not link fails",
         {}, SELFTEST_TABLE.replace("| mid, proto |", "| mid, proto, low |"), 1, ["remove low"]),
        ("a CMake target without a row fails",
         {"src/low/CMakeLists.txt": "add_library(meshrl_low STATIC a.cpp)\nadd_library(meshrl_extra STATIC e.cpp)\n"},
         SELFTEST_TABLE, 1, ["meshrl_extra has no row"]),
        ("a source file no row owns fails",
         {"src/stray/s.cpp": "int x;\n"}, SELFTEST_TABLE, 1, ["src/stray/s.cpp: belongs to no library"]),
    ]
    failures = 0
    for name, files, table, want_rc, want_text in cases:
        rc, out = run_on(files, table)
        ok = rc == want_rc and all(t in out for t in want_text)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        if not ok or want_rc:
            print("     " + out.strip().replace("\n", "\n     "))
    print(f"self-test: {'all passed' if not failures else str(failures) + ' failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(self_test() if "--self-test" in sys.argv else main(sys.argv))
