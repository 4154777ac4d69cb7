"""Sends one scripted sequence of PVE API requests to the ProxOps simulator and to fakepve
(an independent fake PVE), and compares status codes and response shapes step by step.

Usage: side_by_side.py SIM_URL FAKEPVE_URL PASSWORD DIFFERENCES_MD [--print]

Both servers start with the same template VM 9000 on node pve1 and accept a ticket login of
root@pam with PASSWORD. The differences found must be exactly the rows of the table in
DIFFERENCES_MD (between the `<!-- differences -->` markers): each is kept on purpose, with the
PVE fact behind it. Exit status 0 when they match, 1 otherwise (both lists are printed).
"""

import json
import sys
import time
import warnings

import requests

warnings.filterwarnings("ignore")  # self-signed certificates on loopback


class Server:
    def __init__(self, base, password):
        self.base = base.rstrip("/")
        self.s = requests.Session()
        self.s.verify = False
        # verify=False per request: a session-wide setting loses to REQUESTS_CA_BUNDLE.
        r = self.s.post(f"{self.base}/access/ticket", verify=False,
                        data={"username": "root@pam", "password": password}, timeout=10)
        r.raise_for_status()
        d = r.json()["data"]
        self.s.cookies.set("PVEAuthCookie", d["ticket"])
        self.s.headers["CSRFPreventionToken"] = d["CSRFPreventionToken"]

    def call(self, method, path, params=None):
        r = self.s.request(method, f"{self.base}{path}",
                           params=params if method in ("GET", "DELETE") else None,
                           data=params if method in ("POST", "PUT") else None,
                           verify=False, timeout=30)
        try:
            body = r.json()
        except ValueError:
            body = None
        return r.status_code, body

    def wait(self, upid):
        """Polls a task until it stops; returns the final (status, body)."""
        node = upid.split(":")[1]
        deadline = time.monotonic() + 30
        while True:
            status, body = self.call("GET", f"/nodes/{node}/tasks/{upid}/status")
            if status != 200 or body["data"]["status"] == "stopped" or time.monotonic() > deadline:
                return status, body
            time.sleep(0.05)


def shape(v):
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return ["list", shape(v[0]) if v else None]
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "null"


def compare(a, b, path, out):
    """Differences between shapes a (simulator) and b (fakepve) as strings."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}"
            if k not in b:
                out.append(f"only sim: {p}")
            elif k not in a:
                out.append(f"only fakepve: {p}")
            else:
                compare(a[k], b[k], p, out)
    elif isinstance(a, list) and isinstance(b, list):
        if a[1] is not None and b[1] is not None:
            compare(a[1], b[1], f"{path}[]", out)
    elif a != b:
        la = "object" if isinstance(a, dict) else "list" if isinstance(a, list) else a
        lb = "object" if isinstance(b, dict) else "list" if isinstance(b, list) else b
        out.append(f"type {path}: {la} vs {lb}")


CREATE = {"vmid": "100", "name": "web", "memory": "1024", "cores": "2",
          "scsi0": "local-lvm:4", "net0": "virtio,bridge=vmbr0", "tags": "proxops;web"}

# (name, method, path, params, wait for the UPID it returns)
STEPS = [
    ("version", "GET", "/version", None, False),
    ("nodes", "GET", "/nodes", None, False),
    ("cluster status", "GET", "/cluster/status", None, False),
    ("cluster resources", "GET", "/cluster/resources", {"type": "vm"}, False),
    ("nextid", "GET", "/cluster/nextid", None, False),
    ("qemu list", "GET", "/nodes/pve1/qemu", None, False),
    ("template config", "GET", "/nodes/pve1/qemu/9000/config", None, False),
    ("create", "POST", "/nodes/pve1/qemu", CREATE, True),
    ("create again", "POST", "/nodes/pve1/qemu", CREATE, False),
    ("config", "GET", "/nodes/pve1/qemu/100/config", None, False),
    ("pending", "GET", "/nodes/pve1/qemu/100/pending", None, False),
    ("config put", "PUT", "/nodes/pve1/qemu/100/config", {"memory": "2048"}, False),
    ("config post", "POST", "/nodes/pve1/qemu/100/config", {"cores": "4", "delete": "tags"}, True),
    ("bad parameter", "PUT", "/nodes/pve1/qemu/100/config", {"memory": "lots"}, False),
    ("start", "POST", "/nodes/pve1/qemu/100/status/start", None, True),
    ("status", "GET", "/nodes/pve1/qemu/100/status/current", None, False),
    ("destroy running", "DELETE", "/nodes/pve1/qemu/100", None, False),
    ("template running", "POST", "/nodes/pve1/qemu/100/template", None, False),
    ("shutdown", "POST", "/nodes/pve1/qemu/100/status/shutdown", None, True),
    ("resize", "PUT", "/nodes/pve1/qemu/100/resize", {"disk": "scsi0", "size": "+1G"}, True),
    ("clone", "POST", "/nodes/pve1/qemu/9000/clone", {"newid": "101", "name": "c1"}, True),
    ("clone config", "GET", "/nodes/pve1/qemu/101/config", None, False),
    ("clone to existing", "POST", "/nodes/pve1/qemu/9000/clone", {"newid": "100"}, False),
    ("template", "POST", "/nodes/pve1/qemu/101/template", None, True),
    ("storage list", "GET", "/nodes/pve1/storage", None, False),
    ("storage content", "GET", "/nodes/pve1/storage/local-lvm/content", None, False),
    ("task list", "GET", "/nodes/pve1/tasks", None, False),
    ("destroy", "DELETE", "/nodes/pve1/qemu/100", {"purge": "1"}, True),
    ("config of destroyed", "GET", "/nodes/pve1/qemu/100/config", None, False),
    ("lxc list", "GET", "/nodes/pve1/lxc", None, False),
    ("unknown path", "GET", "/nodes/pve1/bogus", None, False),
]


def run(sim, fake):
    found = []
    for name, method, path, params, wait in STEPS:
        results = []
        for server in (sim, fake):
            status, body = server.call(method, path, params)
            upid = body.get("data") if isinstance(body, dict) else None
            task = None
            if wait and status == 200 and isinstance(upid, str) and upid.startswith("UPID:"):
                task = server.wait(upid)
                log = server.call("GET", f"/nodes/pve1/tasks/{upid}/log")
                task = (task, log)
            results.append((status, body, task))
        (s_status, s_body, s_task), (f_status, f_body, f_task) = results
        diffs = []
        if s_status != f_status:
            diffs.append(f"status {s_status} vs {f_status}")
        elif s_status == 200:
            compare(shape(s_body), shape(f_body), "", diffs)
            if (s_task is None) != (f_task is None):
                diffs.append(f"task: {'sim' if s_task else 'fakepve'} only")
            elif s_task:
                for label, a, b in (("task status", s_task[0], f_task[0]), ("task log", s_task[1], f_task[1])):
                    if a[0] != b[0]:
                        diffs.append(f"{label} {a[0]} vs {b[0]}")
                    else:
                        compare(shape(a[1]), shape(b[1]), label, diffs)
                s_exit = s_task[0][1]["data"].get("exitstatus")
                f_exit = f_task[0][1]["data"].get("exitstatus")
                if s_exit != f_exit:
                    diffs.append(f"exitstatus {s_exit!r} vs {f_exit!r}")
        found.extend((name, d) for d in diffs)
    return found


def documented(md_path):
    """Rows `| step | `difference` | why |` between the markers of the document."""
    rows, inside = [], False
    for line in open(md_path, encoding="utf-8"):
        if "<!-- differences -->" in line:
            inside = not inside
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if inside and len(cells) >= 3 and cells[1].startswith("`"):
            rows.append((cells[0], cells[1].strip("`")))
    return rows


def main():
    sim_url, fake_url, password, md = sys.argv[1:5]
    found = run(Server(sim_url, password), Server(fake_url, password))
    if "--print" in sys.argv:
        for step, diff in found:
            print(f"| {step} | `{diff}` | |")
        return 0
    expected = documented(md)
    unexpected = [f for f in found if f not in expected]
    missing = [e for e in expected if e not in found]
    for step, diff in unexpected:
        print(f"UNDOCUMENTED difference at step {step!r}: {diff}")
    for step, diff in missing:
        print(f"documented difference no longer seen at step {step!r}: {diff}")
    print(json.dumps({"steps": len(STEPS), "differences": len(found)}))
    return 1 if unexpected or missing else 0


if __name__ == "__main__":
    sys.exit(main())
