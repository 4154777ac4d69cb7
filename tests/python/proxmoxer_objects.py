"""Reads back, with proxmoxer, every cluster object the homelab's `home` cluster declares, through
the ordinary PVE API, and checks each answer against PVE 9.1.3's API schema and the manifests.

Usage: proxmoxer_objects.py SCHEMA_TREE_JSON HOST PORT USER@REALM!ID=SECRET

The server must be a PVE API (here `proxops sim`) on which `examples/homelab` cluster `home` was
applied. Shapes: every field must be one the endpoint's `returns` names (or, for an object whose
`returns` names none, anything), with the JSON type it gives (booleans as 0/1, as PVE sends them),
and every field it requires present; a field PVE itself sends beyond its schema must be one of
`BEYOND_SCHEMA`'s allowed exceptions, each with the PVE source that sends it. Values: what the
manifests declare, ProxOps's mark `[proxops.home.<kind>.<name>]` included in the free-text fields.
Prints one JSON line (the endpoints read, the exceptions met); exits non-zero listing every
difference found.
"""

import json
import sys
import warnings

from proxmoxer import ProxmoxAPI

warnings.filterwarnings("ignore")  # the server's certificate is self-signed

MARK = "[proxops.home.{}]"


def mark(kind_name):
    return MARK.format(kind_name)


def index(tree):
    """The schema's endpoints by path template: {path: info}."""
    out = {}

    def walk(n):
        if "path" in n:
            out[n["path"]] = n.get("info", {})
        for c in n.get("children") or []:
            walk(c)

    for n in tree:
        walk(n)
    return out


def truthy(v):
    return v is True or v == 1


def params_of(idx, method, path):
    return set(idx[path][method].get("parameters", {}).get("properties", {}))


def beyond_schema(idx):
    """Fields PVE sends beyond an endpoint's `returns` (by "GET <template>"; a `*` key names the
    nested object they are met in), each read in PVE's sources. A `-name` is a required field PVE
    does not send; a `~name` a field whose JSON type differs from the schema's."""
    storage_config = params_of(idx, "POST", "/storage") | {"digest"}
    subnet_config = params_of(idx, "POST", "/cluster/sdn/vnets/{vnet}/subnets")
    return {
        # pve-storage `PVE/API2/Storage/Config.pm` `index`: each storage's whole config
        # (`$api_storage_config`: the section's options, `storage`, `digest`, `content` and
        # `nodes` encoded as lists); the schema names only `storage`.
        "GET /storage": storage_config,
        # pve-manager `PVE/API2/Backup.pm` `index` and `read_job` return the job as jobs.cfg's
        # section config reads it, the section `type` (`vzdump`) included.
        "GET /cluster/backup": {"type"},
        "GET /cluster/backup/{id}": {"type"},
        # jobs.cfg's reader decodes `prune-backups` into an object (pve-guest-common
        # `VZDump/JobBase.pm` `decode_value`, `parse_property_string`), which parses booleans
        # only: `keep-daily=7` arrives as `"7"` though the schema types it `integer`.
        "GET /cluster/backup prune-backups": {"~keep-daily", "~keep-weekly", "~keep-monthly",
                                              "~keep-yearly", "~keep-hourly", "~keep-last"},
        "GET /cluster/backup/{id} prune-backups": {"~keep-daily", "~keep-weekly", "~keep-monthly",
                                                   "~keep-yearly", "~keep-hourly", "~keep-last"},
        # pve-manager `PVE/API2/Cluster/Mapping/PCI.pm` `index`: each mapping's whole config
        # (the section's `type`) and the config `digest`.
        "GET /cluster/mapping/pci": {"type", "digest"},
        # pve-firewall `PVE/API2/Firewall/Cluster.pm` and `VM.pm` `get_options`:
        # `copy_opject_with_digest` adds the file's `digest`.
        "GET /cluster/firewall/options": {"digest"},
        "GET /nodes/{node}/qemu/{vmid}/firewall/options": {"digest"},
        # pve-firewall `Firewall.pm` `parse_alias` keeps each alias's `ipversion`, and
        # `API2/Firewall/Aliases.pm` returns the parsed aliases as they are.
        "GET /cluster/firewall/aliases": {"ipversion"},
        # pve-firewall `API2/Firewall/Rules.pm` `get_rules`: `copy_list_with_digest` adds the
        # list's `digest` to every rule.
        "GET /cluster/firewall/groups/{group}": {"digest"},
        "GET /nodes/{node}/qemu/{vmid}/firewall/rules": {"digest"},
        # The 9.1.3 schema lists no field of a subnet. pve-network `API2/Network/SDN/Subnets.pm`
        # `index` returns each subnet's config (the create parameters' names, `type`) with `id`,
        # `cidr`, `zone`, `network`, `mask` (`Subnets.pm` `sdn_subnets_config`), `subnet`,
        # `digest` and `dhcp-range` (`$api_sdn_subnets_config`).
        "GET /cluster/sdn/vnets/{vnet}/subnets": subnet_config
        | {"type", "id", "cidr", "zone", "network", "mask", "digest", "dhcp-range"},
    }


class Checker:
    def __init__(self, idx):
        self.idx = idx
        self.extra = beyond_schema(idx)
        self.errors = []
        self.met = set()  # exceptions met: "GET /x: field"

    def fail(self, what):
        self.errors.append(what)

    def expect(self, cond, what):
        if not cond:
            self.fail(what)

    def shape(self, template, data):
        """Checks `data` against GET `template`'s `returns` (conformance.rs's `check_value`)."""
        at = f"GET {template}"
        self.value(self.idx[template]["GET"]["returns"], data, at, at)

    def value(self, schema, v, at, key):
        ty = schema.get("type")
        allowed = self.extra.get(key, set())
        name = at.rsplit(".", 1)[-1]
        ok = {
            "object": isinstance(v, dict),
            "array": isinstance(v, list),
            "integer": isinstance(v, int) and not isinstance(v, bool),
            "number": isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": v in (0, 1) and not isinstance(v, float),
            "string": isinstance(v, str),
            "null": v is None,
        }.get(ty, True)
        if not ok:
            if f"~{name}" in allowed:
                self.met.add(f"{key}: {name} ({ty} sent as {type(v).__name__})")
                return
            self.fail(f"{at}: {json.dumps(v)} is not {ty}")
            return
        if "items" in schema and isinstance(v, list):
            for i, x in enumerate(v):
                self.value(schema["items"], x, f"{at}[{i}]", key)
        props = schema.get("properties")
        if props is not None and isinstance(v, dict):
            is_open = truthy(schema.get("additionalProperties"))
            for k, x in v.items():
                family = k.rstrip("0123456789") + "[n]"
                s = props.get(k) or props.get(family)
                if s is not None:
                    # A nested object's exceptions are listed as "GET <template> <field>".
                    method, template = key.split(" ")[:2]
                    nested = f"{method} {template} {k}"
                    self.value(s, x, f"{at}.{k}", nested if nested in self.extra else key)
                elif k in allowed:
                    self.met.add(f"{key}: {k}")
                elif not is_open:
                    self.fail(f"{at}.{k}: not in the schema's returns")
            for k, s in props.items():
                if (not truthy(s.get("optional")) and not k.endswith("[n]") and k not in v
                        and f"-{k}" not in allowed):
                    self.fail(f"{at}.{k}: required but missing")


def row(rows, field, value):
    found = [r for r in rows if r.get(field) == value]
    return found[0] if len(found) == 1 else None


def parts(prop_string):
    return set(p for p in prop_string.split(",") if p)


def main():
    schema_path, host, port, token = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    user, rest = token.split("!", 1)
    name, secret = rest.split("=", 1)
    pve = ProxmoxAPI(host, port=port, user=user, token_name=name, token_value=secret,
                     verify_ssl=False, timeout=30)
    with open(schema_path) as f:
        c = Checker(index(json.load(f)))
    read = []

    def get(template, path, **params):
        data = pve.get(path, **params)
        read.append(path + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else ""))
        c.shape(template, data)
        return data

    # Storage (no mark: a receipt). NFS is shared, and PVE mounts it under /mnt/pve/<id>.
    storages = get("/storage", "storage")
    nas = row(storages, "storage", "nas")
    c.expect(nas is not None, f"/storage lists nas once: {storages}")
    for where, s in (("/storage", nas or {}), ("/storage/nas", get("/storage/{storage}", "storage/nas"))):
        c.expect(s.get("type") == "nfs", f"{where}: type {s.get('type')}")
        c.expect(parts(s.get("content", "")) == {"backup", "iso"}, f"{where}: content {s.get('content')}")
        c.expect(s.get("server") == "192.168.10.40", f"{where}: server {s.get('server')}")
        c.expect(s.get("export") == "/mnt/tank/pve", f"{where}: export {s.get('export')}")
        c.expect(s.get("prune-backups") == "keep-all=1", f"{where}: prune-backups {s.get('prune-backups')}")
        c.expect(s.get("shared") == 1, f"{where}: an NFS storage is shared: {s.get('shared')}")
        c.expect(s.get("path") == "/mnt/pve/nas", f"{where}: path {s.get('path')}")

    # Pool.
    services = "DNS, home automation and the NAS " + mark("pool.services")
    pool = row(get("/pools", "pools"), "poolid", "services")
    c.expect(pool is not None and pool.get("comment") == services, f"/pools: services {pool}")
    pool = get("/pools/{poolid}", "pools/services")
    c.expect(pool.get("comment") == services, f"/pools/services: {pool}")
    c.expect(isinstance(pool.get("members"), list), f"/pools/services: members {pool}")

    # Backup job.
    jobs = get("/cluster/backup", "cluster/backup")
    listed = row(jobs, "id", "nightly")
    c.expect(listed is not None and isinstance(listed.get("next-run"), int),
             f"/cluster/backup: nightly with its next run: {jobs}")
    for where, job in (("/cluster/backup", listed or {}),
                       ("/cluster/backup/nightly", get("/cluster/backup/{id}", "cluster/backup/nightly"))):
        want = {"schedule": "02:30", "storage": "nas", "all": 1, "mode": "snapshot",
                "compress": "zstd", "notification-mode": "notification-system",
                "comment": "nightly backup of every guest " + mark("backupjob.nightly")}
        for k, v in want.items():
            c.expect(job.get(k) == v, f"{where}: {k} {job.get(k)!r}, want {v!r}")
        prune = job.get("prune-backups")
        retention = {k: int(v) for k, v in prune.items()} if isinstance(prune, dict) else prune
        c.expect(retention == {"keep-daily": 7, "keep-weekly": 4},
                 f"{where}: prune-backups {job.get('prune-backups')!r}")

    # PCI resource mapping.
    hba_desc = "LSI SAS2308 HBA " + mark("resourcemapping.hba")
    hba_map = [{"id=1000:0087", "node=pve2", "path=0000:03:00.0"}]
    m = row(get("/cluster/mapping/pci", "cluster/mapping/pci"), "id", "hba")
    for where, m in (("/cluster/mapping/pci", m or {}),
                     ("/cluster/mapping/pci/hba", get("/cluster/mapping/pci/{id}", "cluster/mapping/pci/hba"))):
        c.expect(m.get("description") == hba_desc, f"{where}: description {m.get('description')!r}")
        c.expect([parts(x) for x in m.get("map", [])] == hba_map, f"{where}: map {m.get('map')}")

    # User, group, role, ACL.
    prom = "prometheus-pve-exporter " + mark("user.prometheus")
    u = row(get("/access/users", "access/users"), "userid", "prometheus@pve")
    c.expect(u is not None and u.get("comment") == prom, f"/access/users: prometheus@pve {u}")
    u = row(get("/access/users", "access/users", full=1), "userid", "prometheus@pve")
    c.expect(u is not None and u.get("groups") == "monitoring", f"/access/users?full=1: {u}")
    u = get("/access/users/{userid}", "access/users/prometheus@pve")
    c.expect(u.get("comment") == prom and u.get("groups") == ["monitoring"],
             f"/access/users/prometheus@pve: {u}")
    group = "read-only metrics access " + mark("group.monitoring")
    g = row(get("/access/groups", "access/groups"), "groupid", "monitoring")
    c.expect(g is not None and g.get("comment") == group and g.get("users") == "prometheus@pve",
             f"/access/groups: monitoring {g}")
    g = get("/access/groups/{groupid}", "access/groups/monitoring")
    c.expect(g.get("comment") == group and g.get("members") == ["prometheus@pve"],
             f"/access/groups/monitoring: {g}")
    privs = {"Datastore.Audit", "Pool.Audit", "Sys.Audit", "VM.Audit"}
    r = row(get("/access/roles", "access/roles"), "roleid", "metrics-reader")
    c.expect(r is not None and parts(r.get("privs", "")) == privs and r.get("special") == 0,
             f"/access/roles: metrics-reader {r}")
    r = get("/access/roles/{roleid}", "access/roles/metrics-reader")
    c.expect(r == {p: 1 for p in privs}, f"/access/roles/metrics-reader: {r}")
    token_id = "prometheus@pve!exporter"
    acl = [e for e in get("/access/acl", "access/acl") if e.get("ugid") in ("monitoring", token_id)]
    c.expect(sorted(acl, key=lambda e: e["type"]) == [
        {"path": "/", "type": "group", "ugid": "monitoring", "roleid": "metrics-reader", "propagate": 1},
        {"path": "/", "type": "token", "ugid": token_id, "roleid": "metrics-reader", "propagate": 1},
    ], f"/access/acl: {acl}")
    # The exporter's token: privilege separated, marked; its secret is never read back.
    exporter = "prometheus-pve-exporter scrape token " + mark("apitoken.prometheus-exporter")
    t = row(get("/access/users/{userid}/token", "access/users/prometheus@pve/token"), "tokenid", "exporter")
    c.expect(t is not None and t.get("comment") == exporter and t.get("privsep") == 1,
             f"/access/users/prometheus@pve/token: exporter {t}")
    t = get("/access/users/{userid}/token/{tokenid}", "access/users/prometheus@pve/token/exporter")
    c.expect(t.get("comment") == exporter and t.get("privsep") == 1 and "value" not in t,
             f"/access/users/prometheus@pve/token/exporter: {t}")

    # Firewall: options, alias, IP set, security group with its rules, the guests' rules.
    fw = mark("firewall.home")
    o = get("/cluster/firewall/options", "cluster/firewall/options")
    c.expect(o.get("policy_in") == "DROP" and not o.get("enable"),
             f"/cluster/firewall/options (policy_in DROP, the firewall left off): {o}")
    a = row(get("/cluster/firewall/aliases", "cluster/firewall/aliases"), "name", "lan")
    c.expect(a is not None and a.get("cidr") == "192.168.10.0/24"
             and a.get("comment") == "home LAN " + fw, f"/cluster/firewall/aliases: lan {a}")
    s = row(get("/cluster/firewall/ipset", "cluster/firewall/ipset"), "name", "admins")
    c.expect(s is not None and s.get("comment") == "admin workstations " + fw,
             f"/cluster/firewall/ipset: admins {s}")
    entries = get("/cluster/firewall/ipset/{name}", "cluster/firewall/ipset/admins")
    c.expect(sorted(e.get("cidr") for e in entries) == ["192.168.10.5", "192.168.10.6"]
             and all(e.get("comment", "").endswith(fw) for e in entries),
             f"/cluster/firewall/ipset/admins: {entries}")
    grp = row(get("/cluster/firewall/groups", "cluster/firewall/groups"), "group", "public-web")
    c.expect(grp is not None and grp.get("comment") == "what a public VM answers " + fw,
             f"/cluster/firewall/groups: public-web {grp}")
    rules = get("/cluster/firewall/groups/{group}", "cluster/firewall/groups/public-web")
    want = [("HTTPS", None, "the web"), ("HTTP", None, "redirects to HTTPS"),
            ("SSH", "+admins", "admins only")]
    got = [(r.get("pos"), r.get("type"), r.get("action"), r.get("macro"), r.get("source"),
            r.get("comment"), r.get("enable")) for r in rules]
    c.expect(got == [(i, "in", "ACCEPT", m, src, f"{text} [proxops.home.firewall.home#{i}]", 1)
                     for i, (m, src, text) in enumerate(want)],
             f"/cluster/firewall/groups/public-web: {rules}")
    for vmid, vm in ((120, "docker-host"), (130, "jumpbox")):
        path = f"nodes/pve1/qemu/{vmid}/firewall"
        rules = get("/nodes/{node}/qemu/{vmid}/firewall/rules", path + "/rules")
        got = [(r.get("pos"), r.get("type"), r.get("action"), r.get("comment"), r.get("enable"))
               for r in rules]
        c.expect(got == [(0, "group", "public-web", f"[proxops.home.vm.{vm}#0]", 1)],
                 f"/{path}/rules: {rules}")
        o = get("/nodes/{node}/qemu/{vmid}/firewall/options", path + "/options")
        c.expect(o.get("enable") == 1, f"/{path}/options: {o}")

    # SDN (no mark: receipts): zone, VNet, subnet.
    z = row(get("/cluster/sdn/zones", "cluster/sdn/zones"), "zone", "home")
    c.expect(z is not None and z.get("type") == "simple", f"/cluster/sdn/zones: home {z}")
    v = row(get("/cluster/sdn/vnets", "cluster/sdn/vnets"), "vnet", "iot")
    c.expect(v is not None and v.get("zone") == "home" and v.get("alias") == "IoT devices",
             f"/cluster/sdn/vnets: iot {v}")
    subnets = get("/cluster/sdn/vnets/{vnet}/subnets", "cluster/sdn/vnets/iot/subnets")
    sn = row(subnets, "cidr", "10.30.0.0/24")
    c.expect(sn is not None and sn.get("subnet") == "home-10.30.0.0-24"
             and sn.get("gateway") == "10.30.0.1" and sn.get("snat") == 1
             and sn.get("vnet") == "iot", f"/cluster/sdn/vnets/iot/subnets: {subnets}")

    if c.errors:
        print("\n".join(c.errors))
        raise SystemExit(f"{len(c.errors)} difference(s) from the schema or the manifests")
    print(json.dumps({"read": len(read), "paths": read, "exceptions": sorted(c.met)}))


if __name__ == "__main__":
    main()
