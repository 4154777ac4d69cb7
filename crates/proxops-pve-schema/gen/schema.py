#!/usr/bin/env python3
"""Writes src/table.rs, the one table of PVE API facts every ProxOps crate reads: the parameters of
each endpoint ProxOps or its simulator uses (`ENDPOINTS`), and the config keys of QEMU and LXC
guests (`QEMU_KEYS`, `LXC_KEYS`: the parameters of the config update endpoints without the ones
that steer the request), for both PVE versions ProxOps knows (8.4 and 9.1).

Facts only: names, types, enums, limits, patterns and formats, and each endpoint's permission
check (`user`, `check`), never the schema's descriptions (the pve-docs files are AGPL-3.0; see
../shared/pve-api/README.md). A parameter whose facts are
the same in both versions is one row; one that differs, or exists in one version only, is a row
per version (`versions: V84` / `V91`). An endpoint one version lacks (the HA rules of 9.x) is
marked with the version that has it. An endpoint's `permissions` are one row when the versions
agree, else a row per version. Rows list only what differs from the defaults (`..P`, `..S`,
`..E`), and equal property-string formats share one `PSn` constant.

Named property-string formats (`pve-qm-smbios1`, `pve-qm-watchdog`, ...) have no sub-keys in the
schema, only a `typetext`; their sub-keys are read from it (`[,key=<1|0>]` is an optional
boolean, `<a|b>` an enum, `[[key=]...]` the default key) and the row is a `Fmt::NamedProp`.

Run from the crate directory:
    python3 gen/schema.py ../../../shared/pve-api/pve-api-8.4.2.tree.json \
        ../../../shared/pve-api/pve-api-9.1.3.tree.json > src/table.rs
No crate reads the schemas at run time; tests/conformance.rs checks this table against each.
"""
import json
import os
import re
import sys

# The endpoints the table holds: what the client sends and the simulator serves.
ENDPOINTS = [
    ("GET", "/version"), ("GET", "/nodes"), ("GET", "/nodes/{node}/status"),
    ("GET", "/cluster/resources"), ("GET", "/cluster/nextid"), ("GET", "/cluster/status"),
    ("GET", "/cluster/ha/resources"), ("POST", "/cluster/ha/resources"),
    ("GET", "/cluster/ha/resources/{sid}"), ("PUT", "/cluster/ha/resources/{sid}"),
    ("DELETE", "/cluster/ha/resources/{sid}"),
    ("GET", "/cluster/ha/groups"), ("POST", "/cluster/ha/groups"),
    ("GET", "/cluster/ha/groups/{group}"), ("PUT", "/cluster/ha/groups/{group}"),
    ("DELETE", "/cluster/ha/groups/{group}"), ("GET", "/cluster/ha/status/current"),
    ("GET", "/cluster/ha/rules"), ("POST", "/cluster/ha/rules"),
    ("GET", "/cluster/ha/rules/{rule}"), ("PUT", "/cluster/ha/rules/{rule}"),
    ("DELETE", "/cluster/ha/rules/{rule}"),
    *[(m, f"/cluster/mapping/{t}{p}")
      for t in ("pci", "usb")
      for (m, p) in (("GET", ""), ("POST", ""), ("GET", "/{id}"), ("PUT", "/{id}"), ("DELETE", "/{id}"))],
    ("GET", "/cluster/sdn/vnets"), ("GET", "/cluster/config/join"),
    *[("GET", f"/cluster/firewall/{p}") for p in ("options", "rules", "aliases", "ipset", "groups")],
    *[("GET", f"/nodes/{{node}}/firewall/{p}") for p in ("options", "rules")],
    *[("GET", f"/nodes/{{node}}/{k}/{{vmid}}/firewall/{p}")
      for k in ("qemu", "lxc") for p in ("options", "rules", "aliases", "ipset")],
    ("GET", "/access/permissions"), ("POST", "/access/ticket"), ("GET", "/storage"),
    ("GET", "/access/users"), ("GET", "/access/groups"), ("GET", "/access/domains"),
    ("GET", "/access/acl"), ("GET", "/access/roles"), ("PUT", "/access/acl"),
    ("GET", "/access/users/{userid}"), ("POST", "/storage"), ("PUT", "/nodes/{node}/dns"),
    ("GET", "/cluster/config/qdevice"), ("POST", "/access/users"),
    ("PUT", "/access/users/{userid}"), ("DELETE", "/access/users/{userid}"),
    ("GET", "/access/users/{userid}/token"),
    *[(m, "/access/users/{userid}/token/{tokenid}") for m in ("GET", "POST", "PUT", "DELETE")],
    ("PUT", "/access/password"), ("DELETE", "/storage/{storage}"),
    ("GET", "/storage/{storage}"), ("GET", "/cluster/backup-info/not-backed-up"),
    ("GET", "/cluster/backup"), ("POST", "/cluster/backup"), ("GET", "/cluster/backup/{id}"),
    ("PUT", "/cluster/backup/{id}"), ("DELETE", "/cluster/backup/{id}"),
    ("GET", "/cluster/backup/{id}/included_volumes"), ("GET", "/nodes/{node}/qemu/{vmid}/migrate"),
    ("POST", "/nodes/{node}/vzdump"),
    ("GET", "/nodes/{node}/replication"), ("GET", "/nodes/{node}/subscription"),
    ("GET", "/nodes/{node}/dns"), ("GET", "/nodes/{node}/network"),
    ("GET", "/pools"), ("POST", "/pools"), ("PUT", "/pools"), ("DELETE", "/pools"),
    ("GET", "/pools/{poolid}"), ("PUT", "/pools/{poolid}"), ("DELETE", "/pools/{poolid}"),
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
    ("GET", "/nodes/{node}/lxc/{vmid}/interfaces"),
    ("POST", "/nodes/{node}/lxc/{vmid}/status/start"), ("POST", "/nodes/{node}/lxc/{vmid}/status/stop"),
    ("POST", "/nodes/{node}/lxc/{vmid}/status/shutdown"), ("POST", "/nodes/{node}/lxc/{vmid}/clone"),
    ("POST", "/nodes/{node}/lxc/{vmid}/template"), ("PUT", "/nodes/{node}/lxc/{vmid}/resize"),
    *[("POST", f"/nodes/{{node}}/{k}/{{vmid}}/status/{a}")
      for k in ("qemu", "lxc") for a in ("reboot", "suspend", "resume") + (("reset",) if k == "qemu" else ())],
    ("GET", "/nodes/{node}/qemu/{vmid}/agent"), ("POST", "/nodes/{node}/qemu/{vmid}/agent/ping"),
    ("POST", "/nodes/{node}/qemu/{vmid}/migrate"), ("POST", "/nodes/{node}/lxc/{vmid}/migrate"),
    ("POST", "/nodes/{node}/qemu/{vmid}/move_disk"), ("PUT", "/nodes/{node}/qemu/{vmid}/unlink"),
    ("POST", "/nodes/{node}/lxc/{vmid}/move_volume"),
    *[("GET", f"/nodes/{{node}}/qemu/{{vmid}}/agent/{c}")
      for c in ("info", "network-get-interfaces", "get-osinfo", "get-host-name", "get-time")],
    *[(m, f"/nodes/{{node}}/{k}/{{vmid}}/snapshot{p}")
      for k in ("qemu", "lxc")
      for (m, p) in (("GET", ""), ("POST", ""), ("GET", "/{snapname}"), ("DELETE", "/{snapname}"),
                     ("GET", "/{snapname}/config"), ("PUT", "/{snapname}/config"),
                     ("POST", "/{snapname}/rollback"))],
    ("GET", "/nodes/{node}/storage"), ("GET", "/nodes/{node}/storage/{storage}/content"),
    ("GET", "/nodes/{node}/storage/{storage}/content/{volume}"),
    ("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}"),
    ("POST", "/nodes/{node}/storage/{storage}/download-url"),
    ("POST", "/nodes/{node}/storage/{storage}/upload"),
    ("GET", "/nodes/{node}/aplinfo"), ("POST", "/nodes/{node}/aplinfo"),
    ("GET", "/nodes/{node}/tasks"), ("GET", "/nodes/{node}/tasks/{upid}/status"),
    ("GET", "/nodes/{node}/tasks/{upid}/log"), ("DELETE", "/nodes/{node}/tasks/{upid}"),
    # sim-firewall: the firewall configuration written through the API (cluster, guests,
    # security groups).
    ("PUT", "/cluster/firewall/options"),
    *[(m, f"{base}/firewall/{p}")
      for base in ("/cluster", "/nodes/{node}/qemu/{vmid}", "/nodes/{node}/lxc/{vmid}")
      for (m, p) in (("POST", "rules"), ("GET", "rules/{pos}"), ("PUT", "rules/{pos}"),
                     ("DELETE", "rules/{pos}"), ("POST", "aliases"), ("GET", "aliases/{name}"),
                     ("PUT", "aliases/{name}"), ("DELETE", "aliases/{name}"), ("POST", "ipset"),
                     ("GET", "ipset/{name}"), ("POST", "ipset/{name}"), ("DELETE", "ipset/{name}"),
                     ("GET", "ipset/{name}/{cidr}"), ("PUT", "ipset/{name}/{cidr}"),
                     ("DELETE", "ipset/{name}/{cidr}"))],
    *[("PUT", f"/nodes/{{node}}/{k}/{{vmid}}/firewall/options") for k in ("qemu", "lxc")],
    ("POST", "/cluster/firewall/groups"),
    *[(m, "/cluster/firewall/groups/{group}") for m in ("GET", "POST", "DELETE")],
    *[(m, "/cluster/firewall/groups/{group}/{pos}") for m in ("GET", "PUT", "DELETE")],
    # sim-sdn-access: storage updates, access groups and roles, SDN with pending changes.
    ("PUT", "/storage/{storage}"),
    *[(m, f"/access/{c}{p}")
      for (c, i) in (("groups", "groupid"), ("roles", "roleid"))
      for (m, p) in (("POST", ""), ("GET", f"/{{{i}}}"), ("PUT", f"/{{{i}}}"), ("DELETE", f"/{{{i}}}"))],
    ("GET", "/cluster/sdn"), ("PUT", "/cluster/sdn"),
    ("GET", "/cluster/sdn/zones"), ("POST", "/cluster/sdn/zones"),
    *[(m, "/cluster/sdn/zones/{zone}") for m in ("GET", "PUT", "DELETE")],
    ("POST", "/cluster/sdn/vnets"),
    *[(m, "/cluster/sdn/vnets/{vnet}") for m in ("GET", "PUT", "DELETE")],
    ("GET", "/cluster/sdn/vnets/{vnet}/subnets"), ("POST", "/cluster/sdn/vnets/{vnet}/subnets"),
    *[(m, "/cluster/sdn/vnets/{vnet}/subnets/{subnet}") for m in ("GET", "PUT", "DELETE")],
]

# The config update endpoints whose parameters are the guest config keys, and the parameters of
# them that steer the request rather than set a key.
GUESTS = [
    ("QEMU_KEYS", "POST", "/nodes/{node}/qemu/{vmid}/config"),
    ("LXC_KEYS", "PUT", "/nodes/{node}/lxc/{vmid}/config"),
]
CONTROL = {"node", "vmid", "delete", "digest", "revert", "skiplock", "force",
           "background_delay", "import-working-storage"}

# The versions, in the order of the command line, with their `Versions` constant.
VERSIONS = ["V84", "V91"]

TY = {"string": "Str", "integer": "Int", "number": "Num", "boolean": "Bool", "array": "Array"}

# Named formats whose typetext is not a property string although it holds a `=`.
NOT_PROPERTY_STRINGS = {"pve-startup-order"}


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


subsets = {}  # the rows of a property-string format -> const name
sub_out = []


def limits(d):
    fields = []
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
        fields += limits(d)
        rows.append("    Sub { " + ", ".join(fields) + ", ..S },")
    key = "\n".join(rows)
    if key in subsets:
        return subsets[key]
    name = f"PS{len(subsets)}"
    subsets[key] = name
    sub_out.append(f"const {name}: &[Sub] = &[\n{key}\n];\n")
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
    """The fields of a parameter row that differ from the defaults, without `versions`."""
    fields = [f"name: {rs(k)}"]
    ty = TY.get(d.get("type", "string"), "Str")
    if ty != "Str":
        fields.append(f"ty: Ty::{ty}")
    if d.get("optional"):
        fields.append("optional: true")
    if d.get("enum"):
        fields.append(f"enums: {strs(d['enum'])}")
    f = d.get("format")
    if isinstance(f, dict):
        fields.append(f"format: Fmt::Prop({sub_const(f)})")
    elif isinstance(f, str):
        parsed = typetext_format(d.get("typetext"))
        if parsed and f not in NOT_PROPERTY_STRINGS:
            fields.append(f"format: Fmt::NamedProp({rs(f)}, {sub_const(parsed)})")
        else:
            fields.append(f"format: Fmt::Named({rs(f)})")
    fields += limits(d)
    if d.get("requires"):
        fields.append(f"requires: Some({rs(d['requires'])})")
    items = (d.get("items") or {}).get("format")
    if isinstance(items, dict):
        fields.append(f"items: Fmt::Prop({sub_const(items)})")
    return fields


def param_rows(per_version, served, indent, skip=()):
    """One row per parameter, or one per version where the versions that serve it differ."""
    rows = []
    present = [(v, pv) for v, pv in zip(VERSIONS, per_version) if v in served]
    for k in sorted(set().union(*per_version)):
        if k in skip:
            continue
        defs = [(v, pv.get(k)) for v, pv in present]
        if all(d is not None and d == defs[0][1] for _, d in defs):
            rows.append(indent + "Param { " + ", ".join(defs[0][1]) + ", ..P },")
            continue
        for v, d in defs:
            if d is not None:
                rows.append(indent + "Param { " + ", ".join(d + [f"versions: {v}"]) + ", ..P },")
    return rows


def params_of(trees, method, path):
    per_version, served = [], []
    for v, idx in zip(VERSIONS, trees):
        info = idx.get(path, {}).get("info", {}).get(method)
        if info is None:
            per_version.append({})
            continue
        served.append(v)
        props = info.get("parameters", {}).get("properties", {})
        per_version.append({k: param_fields(k, props[k]) for k in props})
    if not served:
        sys.exit(f"{method} {path} is in no schema")
    return per_version, served


PERM_USERS = {"all": "PermUser::All", "world": "PermUser::World"}
USERID_PARAM = {"self": "UseridParam::SelfUser", "Realm.AllocateUser": "UseridParam::RealmAllocateUser"}
GROUPS_PARAM = {"create": "GroupsParam::Create", "update": "GroupsParam::Update"}


def check_options(check, rest, allowed):
    """The `key, value` options after a check's fixed arguments; an unknown one stops the run."""
    if len(rest) % 2:
        sys.exit(f"odd options in permission check {check!r}")
    opts = dict(zip(rest[::2], rest[1::2]))
    if set(opts) - allowed:
        sys.exit(f"unknown option in permission check {check!r}")
    return opts


def check_rs(c):
    """A `Check` expression for one `check` of the schema; a form it does not know stops the run."""
    if not isinstance(c, list) or not c:
        sys.exit(f"permission check {c!r} is not a list")
    head, args = c[0], c[1:]
    if head in ("and", "or") and args:
        return f"Check::{head.capitalize()}(&[" + ", ".join(check_rs(x) for x in args) + "])"
    if head == "perm" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], list):
        opts = check_options(c, args[2:], {"any", "require_param"})
        rp = opts.get("require_param")
        return (
            f"Check::Perm {{ path: {rs(args[0])}, privs: {strs(args[1])}, "
            f"any: {'true' if opts.get('any') else 'false'}, "
            f"require_param: {('Some(' + rs(rp) + ')') if rp else 'None'} }}"
        )
    if head == "userid-param" and len(args) == 1 and args[0] in USERID_PARAM:
        return f"Check::UseridParam({USERID_PARAM[args[0]]})"
    if head == "userid-group" and args and isinstance(args[0], list):
        gp = check_options(c, args[1:], {"groups_param"}).get("groups_param")
        if gp is not None and gp not in GROUPS_PARAM:
            sys.exit(f"unknown groups_param in permission check {c!r}")
        return (
            f"Check::UseridGroup {{ privs: {strs(args[0])}, "
            f"groups_param: {('Some(' + GROUPS_PARAM[gp] + ')') if gp else 'None'} }}"
        )
    if head == "perm-modify" and len(args) == 1 and isinstance(args[0], str):
        return f"Check::PermModify({rs(args[0])})"
    sys.exit(f"unknown permission check {c!r}")


def permissions_fields(perm):
    """The fields of a `Permissions` row (without `versions`): `user` and `check`, never the
    `description`."""
    perm = perm or {}
    if set(perm) - {"user", "check", "description"}:
        sys.exit(f"unknown permissions keys {sorted(perm)}")
    fields = []
    if "user" in perm:
        if perm["user"] not in PERM_USERS:
            sys.exit(f"unknown permissions user {perm['user']!r}")
        fields.append(f"user: Some({PERM_USERS[perm['user']]})")
    if "check" in perm:
        fields.append(f"check: Some({check_rs(perm['check'])})")
    return fields


def permissions_rows(trees, method, path):
    """The `permissions` of an endpoint: one row when the versions that serve it agree, else one
    per version."""
    per_version = []
    for v, idx in zip(VERSIONS, trees):
        info = idx.get(path, {}).get("info", {}).get(method)
        if info is not None:
            per_version.append((v, permissions_fields(info.get("permissions"))))
    if all(f == per_version[0][1] for _, f in per_version):
        per_version = [(None, per_version[0][1])]
    rows = []
    for v, fields in per_version:
        fields = fields + ([f"versions: {v}"] if v else [])
        rows.append("Permissions { " + ", ".join(fields + ["..A"]) + " }")
    return "permissions: &[" + ", ".join(rows) + "]"


def main():
    paths = sys.argv[1:]
    if len(paths) != len(VERSIONS):
        sys.exit(f"usage: {sys.argv[0]} " + " ".join(f"<{v} schema>" for v in VERSIONS))
    trees = [index(p) for p in paths]
    eps = []
    for method, path in ENDPOINTS:
        per_version, served = params_of(trees, method, path)
        only = f"versions: {served[0]}, " if len(served) == 1 else ""
        base = "" if only else ", ..E"  # every field given: no base
        rows = param_rows(per_version, served, "        ")
        body = "\n".join(rows)
        perms = permissions_rows(trees, method, path)
        eps.append(
            f"    Endpoint {{ method: {rs(method)}, path: {rs(path)}, {only}params: &[\n{body}\n    ], {perms}{base} }},"
            if rows
            else f"    Endpoint {{ method: {rs(method)}, path: {rs(path)}, {only}params: &[], {perms}{base} }},"
        )
    guests = []
    for const, method, path in GUESTS:
        per_version, served = params_of(trees, method, path)
        rows = param_rows(per_version, served, "    ", skip=CONTROL)
        guests.append((const, method, path, "\n".join(rows)))
    names = ", ".join(os.path.basename(p) for p in paths)
    print(f"// @generated by gen/schema.py from {names} (facts only: names,")
    print("// types, enums, formats, limits, patterns, permission checks). Do not edit by hand; tests/conformance.rs checks it")
    print("// against each schema.")
    print("#![allow(clippy::approx_constant, clippy::unreadable_literal)]\n")
    print("use crate::{Check, Endpoint, Fmt, GroupsParam, Param, PermUser, Permissions, Sub, Ty, UseridParam, Versions};\n")
    print("const P: Param = Param::DEFAULT;")
    print("const S: Sub = Sub::DEFAULT;")
    print("const E: Endpoint = Endpoint::DEFAULT;")
    print("const A: Permissions = Permissions::DEFAULT;")
    print("const V84: Versions = Versions::V8_4;")
    print("const V91: Versions = Versions::V9_1;\n")
    print("/// The parameters of the config update endpoints that steer the request instead of")
    print("/// setting a config key (the guest keys below are the endpoints' parameters without these).")
    print("pub static CONFIG_CONTROL: &[&str] = &[" + ", ".join(rs(c) for c in sorted(CONTROL)) + "];\n")
    print("/// Every endpoint ProxOps uses with its parameters, in the generator's order.")
    print("pub static ENDPOINTS: &[Endpoint] = &[\n" + "\n".join(eps) + "\n];\n")
    for const, method, path, body in guests:
        print(f"/// The config keys of `{method} {path}`, by name.")
        print(f"pub static {const}: &[Param] = &[\n{body}\n];\n")
    print("\n".join(sub_out))


main()
