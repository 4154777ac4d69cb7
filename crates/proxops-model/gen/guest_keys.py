#!/usr/bin/env python3
"""Writes src/pve_config/table.rs: the config keys of PVE's QEMU and LXC guests, for both PVE
versions ProxOps knows (8.4 and 9.1), with what `pve-config:` needs to check a value as PVE's
`PVE::JSONSchema` does: type, enum, range, length, pattern, named format, and the sub-keys of a
property string.

Facts only: names, types, enums, limits, patterns and formats, never the schema's descriptions
(the pve-docs files are AGPL-3.0; see ../shared/pve-api/README.md). A key whose facts are the
same in both versions is one row; one that differs, or exists in one version only, is a row per
version (`versions: V84` / `V91`). Rows list only what differs from the defaults (`..K`, `..S`).
Named property-string formats (`pve-qm-smbios1`, `pve-qm-watchdog`, ...) have no sub-keys in the
schema, only a `typetext`; their sub-keys are read from it (`[,key=<1|0>]` is an optional
boolean, `<a|b>` an enum, `[[key=]...]` the default key).

Config keys are the parameters of the config update endpoints (qemu `POST
/nodes/{node}/qemu/{vmid}/config`, lxc `PUT /nodes/{node}/lxc/{vmid}/config`) without the ones
that steer the request (`CONTROL`). Run from the crate directory:
    python3 gen/guest_keys.py ../../../shared/pve-api/pve-api-8.4.2.tree.json \
        ../../../shared/pve-api/pve-api-9.1.3.tree.json > src/pve_config/table.rs
The crate never reads the schemas; tests/model/pve_config.rs checks this table against them.
"""
import json
import re
import sys

GUESTS = [
    ("QEMU", "/nodes/{node}/qemu/{vmid}/config", "POST"),
    ("LXC", "/nodes/{node}/lxc/{vmid}/config", "PUT"),
]
VERSIONS = ["V84", "V91"]
# Parameters of the update endpoints that are not config keys.
CONTROL = {"node", "vmid", "delete", "digest", "revert", "skiplock", "force",
           "background_delay", "import-working-storage"}
TY = {"string": "Str", "integer": "Int", "number": "Num", "boolean": "Bool"}


def rs(s):
    return json.dumps(s)


def num(v):
    return f"Some({float(v)!r})"


def strs(xs):
    return "&[" + ", ".join(rs(str(x)) for x in xs) + "]"


def index(path):
    idx = {}

    def walk(n):
        idx[n["path"]] = n
        for c in n.get("children") or []:
            walk(c)

    for n in json.load(open(path)):
        walk(n)
    return idx


subsets = {}
sub_out = []


def sub_fields(k, d):
    fields = [f"name: {rs(k)}"]
    ty = TY.get(d.get("type", "string"), "Str")
    if ty != "Str":
        fields.append(f"ty: Ty::{ty}")
    if d.get("optional"):
        fields.append("optional: true")
    if d.get("default_key"):
        fields.append("default_key: true")
    if d.get("enum"):
        fields.append(f"enums: {strs(d['enum'])}")
    f = d.get("format")
    if isinstance(f, str):
        fields.append(f"format: Some({rs(f)})")
    if d.get("minimum") is not None:
        fields.append(f"min: {num(d['minimum'])}")
    if d.get("maximum") is not None:
        fields.append(f"max: {num(d['maximum'])}")
    if d.get("maxLength"):
        fields.append(f"max_len: Some({d['maxLength']})")
    if d.get("pattern"):
        fields.append(f"pattern: Some({rs(d['pattern'])})")
    return fields


def sub_const(fmt):
    rows = []
    for k in sorted(fmt):
        d = fmt[k]
        if "alias" in d:
            ka = d.get("keyAlias")
            rows.append(
                f"    Sub::alias({rs(k)}, {rs(d['alias'])}, {('Some(' + rs(ka) + ')') if ka else 'None'}),"
            )
            continue
        rows.append("    Sub { " + ", ".join(sub_fields(k, d)) + ", ..S },")
    body = "\n".join(rows)
    if body in subsets:
        return subsets[body]
    name = f"PS{len(subsets)}"
    subsets[body] = name
    sub_out.append(f"const {name}: &[Sub] = &[\n{body}\n];\n")
    return name


def typetext_format(text):
    """The sub-keys of a named property-string format from its typetext, or None."""
    if not text or "=" not in text:
        return None
    fmt = {}
    # `[[key=]<...>]` (default key), `[,key=<...>]` / `[key=<...>]` (optional), `,key=<...>` or
    # `key=<...>` (required).
    for m in re.finditer(r"(\[\[|\[,?|,|^)\s*([A-Za-z0-9_-]+)=(\]?)(<[^>]*>|\S+?)(?=\]|\s|,|$)", text):
        opener, key, closed_default, value = m.groups()
        d = {"type": "string"}
        if closed_default == "]":
            # `[[key=]<v>]`: an optional default key; `[key=]<v>`: a required one.
            d["default_key"] = 1
            if opener == "[[":
                d["optional"] = 1
        elif opener.startswith("["):
            d["optional"] = 1
        inner = value[1:-1] if value.startswith("<") else ""
        if inner == "1|0":
            d["type"] = "boolean"
        elif inner == "integer":
            d["type"] = "integer"
        elif (
            inner
            and "|" in inner
            and re.fullmatch(r"[A-Za-z0-9_.|/-]+", inner)
            # `<8-64|host>` is a range or a word, not a list of words.
            and not any(re.fullmatch(r"\d+-\d+", a) for a in inner.split("|"))
        ):
            d["enum"] = inner.split("|")
        fmt[key] = d
    return fmt or None


def param_fields(k, d):
    fields = [f"name: {rs(k)}"]
    ty = TY.get(d.get("type", "string"), "Str")
    if ty != "Str":
        fields.append(f"ty: Ty::{ty}")
    if d.get("enum"):
        fields.append(f"enums: {strs(d['enum'])}")
    f = d.get("format")
    if isinstance(f, dict):
        fields.append(f"format: Fmt::Prop({sub_const(f)})")
    elif isinstance(f, str):
        parsed = typetext_format(d.get("typetext"))
        if parsed and f not in ("pve-startup-order",):
            fields.append(f"format: Fmt::NamedProp({rs(f)}, {sub_const(parsed)})")
        else:
            fields.append(f"format: Fmt::Named({rs(f)})")
    if d.get("minimum") is not None:
        fields.append(f"min: {num(d['minimum'])}")
    if d.get("maximum") is not None:
        fields.append(f"max: {num(d['maximum'])}")
    if d.get("maxLength"):
        fields.append(f"max_len: Some({d['maxLength']})")
    if d.get("pattern"):
        fields.append(f"pattern: Some({rs(d['pattern'])})")
    return fields


def main():
    paths = sys.argv[1:]
    if len(paths) != len(VERSIONS):
        sys.exit(f"usage: {sys.argv[0]} " + " ".join(f"<{v} schema>" for v in VERSIONS))
    trees = [index(p) for p in paths]
    tables = []
    for const, path, method in GUESTS:
        per_version = []
        for idx in trees:
            props = idx[path]["info"][method]["parameters"]["properties"]
            per_version.append(
                {k: param_fields(k, props[k]) for k in props if k not in CONTROL}
            )
        rows = []
        for k in sorted(set().union(*per_version)):
            defs = [pv.get(k) for pv in per_version]
            if all(d is not None and d == defs[0] for d in defs):
                rows.append("    Key { " + ", ".join(defs[0]) + ", ..K },")
                continue
            for v, d in zip(VERSIONS, defs):
                if d is not None:
                    rows.append("    Key { " + ", ".join(d + [f"versions: {v}"]) + ", ..K },")
        tables.append((const, path, method, "\n".join(rows)))
    names = ", ".join(p.rsplit("/", 1)[-1] for p in paths)
    print(f"// @generated by gen/guest_keys.py from {names} (facts only: names, types,")
    print("// enums, formats, limits, patterns). Do not edit by hand; tests/model/pve_config.rs checks it")
    print("// against each schema.")
    print("#![allow(clippy::approx_constant, clippy::unreadable_literal)]\n")
    print("use super::{Fmt, Key, Sub, Ty, Versions};\n")
    print("const K: Key = Key::DEFAULT;")
    print("const S: Sub = Sub::DEFAULT;")
    print("const V84: Versions = Versions::V8_4;")
    print("const V91: Versions = Versions::V9_1;\n")
    for const, path, method, body in tables:
        print(f"/// The config keys of `{method} {path}`, by name.")
        print(f"pub static {const}: &[Key] = &[\n{body}\n];\n")
    print("\n".join(sub_out))


main()
