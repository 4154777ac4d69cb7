"""Drives a PVE API with proxmoxer (a third-party PVE client) through a typical lifecycle:
create a VM, clone a template, download an ISO with download-url, wait on every task, delete.

Usage: proxmoxer_drive.py HOST PORT (--token USER@REALM!ID=SECRET | --password PASSWORD)

The server must have node pve1 with storages local (iso) and local-lvm (images), and template
VM 9000. Prints one JSON line of what it saw; exits non-zero on the first failed expectation.
"""

import hashlib
import http.server
import json
import os
import sys
import tempfile
import threading
import warnings

from proxmoxer import ProxmoxAPI, ResourceException
from proxmoxer.tools import Tasks

warnings.filterwarnings("ignore")  # the server's certificate is self-signed


def expect(cond, what):
    if not cond:
        raise SystemExit(f"expectation failed: {what}")


def serve(directory):
    """A loopback HTTP server for download-url; returns its base URL."""
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=directory, **k)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def wait(pve, upid):
    status = Tasks.blocking_status(pve, upid, timeout=30, polling_interval=0.05)
    expect(status is not None and status["status"] == "stopped", f"task {upid} stopped")
    expect(status["exitstatus"] == "OK", f"task {upid} OK, got {status['exitstatus']!r}")
    return status


def main():
    host, port, mode, secret = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if mode == "--token":
        user, token = secret.split("!", 1)
        name, value = token.split("=", 1)
        pve = ProxmoxAPI(host, port=port, user=user, token_name=name, token_value=value,
                         verify_ssl=False, timeout=30)
    else:
        pve = ProxmoxAPI(host, port=port, user="root@pam", password=secret,
                         verify_ssl=False, timeout=30)
    seen = {"version": pve.version.get()["version"]}
    node = pve.nodes("pve1")
    expect([n["node"] for n in pve.nodes.get()] == ["pve1"], "one node pve1")

    vmid = int(pve.cluster.nextid.get())
    wait(pve, node.qemu.post(vmid=vmid, name="proxmoxer-vm", memory=1024, cores=2,
                             scsi0="local-lvm:4", net0="virtio,bridge=vmbr0", tags="proxops"))
    config = node.qemu(vmid).config.get()
    expect(config["name"] == "proxmoxer-vm", "created VM's name")
    expect(config["scsi0"].startswith(f"local-lvm:vm-{vmid}-disk-0"), f"disk allocated: {config['scsi0']}")
    expect(config["net0"].startswith("virtio="), f"MAC assigned: {config['net0']}")

    clone = int(pve.cluster.nextid.get())
    expect(clone != vmid, "nextid moves past the new VM")
    upid = node.qemu(9000).clone.post(newid=clone, name="proxmoxer-clone", full=1)
    wait(pve, upid)
    cloned = node.qemu(clone).config.get()
    expect("lock" not in cloned, "clone lock released")
    expect(cloned.get("smbios1", "").startswith("uuid="), f"clone has its own SMBIOS uuid: {cloned}")
    guests = {g["vmid"]: g for g in pve.cluster.resources.get(type="vm")}
    expect(guests[clone]["template"] == 0 and guests[9000]["template"] == 1, "template flags")

    with tempfile.TemporaryDirectory() as d:
        payload = os.urandom(64 * 1024)
        with open(os.path.join(d, "tiny.iso"), "wb") as f:
            f.write(payload)
        url = serve(d) + "/tiny.iso"
        upid = node.storage("local")("download-url").post(
            content="iso", filename="tiny.iso", url=url,
            checksum=hashlib.sha256(payload).hexdigest(), **{"checksum-algorithm": "sha256"})
        expect(":download:tiny.iso:" in upid, f"download task id is the filename: {upid}")
        wait(pve, upid)
    isos = node.storage("local").content.get(content="iso")
    expect([(v["volid"], v["size"]) for v in isos] == [("local:iso/tiny.iso", len(payload))],
           f"downloaded ISO listed: {isos}")
    log = node.tasks(upid).log.get()
    expect(len(log) > 0, "the download task has a log")

    for guest in (vmid, clone):
        wait(pve, node.qemu(guest).delete(purge=1))
        try:
            node.qemu(guest).config.get()
            expect(False, f"VM {guest} is gone")
        except ResourceException as e:
            expect(e.status_code == 500 and "does not exist" in str(e), f"gone: {e}")
    seen["vms"] = sorted(g["vmid"] for g in pve.cluster.resources.get(type="vm"))
    expect(seen["vms"] == [9000], "only the template is left")
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
