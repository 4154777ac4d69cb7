#!/usr/bin/env python3
"""Writes src/schema/table.rs: the parameter definitions of the endpoints the simulator implements.

Only facts are taken from the PVE schema (names, types, enums, formats, limits, patterns), never its
descriptions. Run from the crate directory with the schema's path:
    python3 gen/schema_table.py ../../../shared/pve-api/pve-api-8.4.2.tree.json > src/schema/table.rs
The crate never reads the schema at run time; tests/sim/conformance.rs checks this table against it.
"""
import json, sys

ENDPOINTS = [
    ("GET", "/version"), ("GET", "/nodes"), ("GET", "/nodes/{node}/status"),
    ("GET", "/cluster/resources"), ("GET", "/cluster/nextid"), ("GET", "/cluster/status"),
    ("GET", "/cluster/ha/resources"), ("POST", "/cluster/ha/resources"),
    ("DELETE", "/cluster/ha/resources/{sid}"),
    ("GET", "/cluster/mapping/pci"), ("GET", "/cluster/mapping/pci/{id}"),
    ("GET", "/cluster/mapping/usb"), ("GET", "/cluster/mapping/usb/{id}"),
    ("GET", "/cluster/sdn/vnets"),
    ("GET", "/access/permissions"), ("POST", "/access/ticket"), ("GET", "/storage"),
    ("GET", "/nodes/{node}/qemu"), ("POST", "/nodes/{node}/qemu"),
    ("GET", "/nodes/{node}/qemu/{vmid}"), ("DELETE", "/nodes/{node}/qemu/{vmid}"),
    ("GET", "/nodes/{node}/qemu/{vmid}/config"), ("POST", "/nodes/{node}/qemu/{vmid}/config"),
    ("PUT", "/nodes/{node}/qemu/{vmid}/config"), ("GET", "/nodes/{node}/qemu/{vmid}/pending"),
    ("GET", "/nodes/{node}/qemu/{vmid}/status/current"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/start"), ("POST", "/nodes/{node}/qemu/{vmid}/status/stop"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown"), ("POST", "/nodes/{node}/qemu/{vmid}/clone"),
    ("POST", "/nodes/{node}/qemu/{vmid}/template"), ("PUT", "/nodes/{node}/qemu/{vmid}/resize"),
    ("GET", "/nodes/{node}/lxc"), ("POST", "/nodes/{node}/lxc"),
    ("GET", "/nodes/{node}/lxc/{vmid}"), ("DELETE", "/nodes/{node}/lxc/{vmid}"),
    ("GET", "/nodes/{node}/lxc/{vmid}/config"), ("PUT", "/nodes/{node}/lxc/{vmid}/config"),
    ("GET", "/nodes/{node}/lxc/{vmid}/pending"), ("GET", "/nodes/{node}/lxc/{vmid}/status/current"),
    ("POST", "/nodes/{node}/lxc/{vmid}/status/start"), ("POST", "/nodes/{node}/lxc/{vmid}/status/stop"),
    ("POST", "/nodes/{node}/lxc/{vmid}/status/shutdown"), ("POST", "/nodes/{node}/lxc/{vmid}/clone"),
    ("POST", "/nodes/{node}/lxc/{vmid}/template"), ("PUT", "/nodes/{node}/lxc/{vmid}/resize"),
    ("GET", "/nodes/{node}/storage"), ("GET", "/nodes/{node}/storage/{storage}/content"),
    ("GET", "/nodes/{node}/storage/{storage}/content/{volume}"),
    ("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}"),
    ("POST", "/nodes/{node}/storage/{storage}/download-url"),
    ("GET", "/nodes/{node}/tasks"), ("GET", "/nodes/{node}/tasks/{upid}/status"),
    ("GET", "/nodes/{node}/tasks/{upid}/log"), ("DELETE", "/nodes/{node}/tasks/{upid}"),
]

TY = {"string": "Str", "integer": "Int", "number": "Num", "boolean": "Bool"}


def rs(s):
    return json.dumps(s)


def num(v):
    if v is None:
        return "None"
    return f"Some({float(v)!r})"


def strs(xs):
    return "&[" + ", ".join(rs(x) for x in xs) + "]"


def main():
    tree = json.load(open(sys.argv[1]))
    idx = {}

    def walk(n):
        idx[n["path"]] = n
        for c in n.get("children") or []:
            walk(c)

    for n in tree:
        walk(n)

    subsets = {}  # canonical json of a property-string format -> const name
    sub_out = []

    def sub_const(fmt):
        key = json.dumps(fmt, sort_keys=True)
        if key in subsets:
            return subsets[key]
        name = f"PS{len(subsets)}"
        subsets[key] = name
        rows = []
        for k in sorted(fmt):
            d = fmt[k]
            if "alias" in d:
                ka = d.get("keyAlias"); rows.append(f"    Sub::alias({rs(k)}, {rs(d['alias'])}, {('Some(' + rs(ka) + ')') if ka else 'None'}),")
                continue
            ty = TY.get(d.get("type", "string"), "Str")
            f = d.get("format") if isinstance(d.get("format"), str) else None
            rows.append(
                f"    Sub {{ name: {rs(k)}, ty: Ty::{ty}, optional: {str(bool(d.get('optional'))).lower()}, "
                f"default_key: {str(bool(d.get('default_key'))).lower()}, enums: {strs(d.get('enum') or [])}, "
                f"format: {('Some(' + rs(f) + ')') if f else 'None'}, alias: None, key_alias: None }},"
            )
        sub_out.append(f"const {name}: &[Sub] = &[\n" + "\n".join(rows) + "\n];\n")
        return name

    eps = []
    for method, path in ENDPOINTS:
        info = idx[path]["info"][method]
        props = info.get("parameters", {}).get("properties", {})
        rows = []
        for k in sorted(props):
            d = props[k]
            ty = TY.get(d.get("type", "string"), "Str")
            f = d.get("format")
            if isinstance(f, dict):
                fmt = f"Fmt::Prop({sub_const(f)})"
            elif isinstance(f, str):
                fmt = f"Fmt::Named({rs(f)})"
            else:
                fmt = "Fmt::None"
            rows.append(
                f"        Param {{ name: {rs(k)}, ty: Ty::{ty}, optional: {str(bool(d.get('optional'))).lower()}, "
                f"enums: {strs(d.get('enum') or [])}, format: {fmt}, min: {num(d.get('minimum'))}, "
                f"max: {num(d.get('maximum'))}, max_len: {('Some(' + str(d['maxLength']) + ')') if d.get('maxLength') else 'None'}, "
                f"pattern: {('Some(' + rs(d['pattern']) + ')') if d.get('pattern') else 'None'}, "
                f"requires: {('Some(' + rs(d['requires']) + ')') if d.get('requires') else 'None'} }},"
            )
        eps.append(
            f"    Endpoint {{\n        method: {rs(method)},\n        path: {rs(path)},\n        params: &[\n"
            + "\n".join(rows)
            + "\n        ],\n    },"
        )
    print("// @generated by gen/schema_table.py from pve-api-8.4.2.tree.json (facts only: names, types,")
    print("// enums, formats, limits). Do not edit by hand; tests/sim/conformance.rs checks it against the schema.")
    print("#![allow(clippy::approx_constant, clippy::unreadable_literal)]\n")
    print("use super::{Endpoint, Fmt, Param, Sub, Ty};\n")
    body = "/// Every implemented endpoint with its parameters, in the schema's order of paths.\n"
    body += "pub static ENDPOINTS: &[Endpoint] = &[\n" + "\n".join(eps) + "\n];\n"
    print(body)
    print("\n".join(sub_out))


main()
