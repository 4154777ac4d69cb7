"""Scrapes a PVE API with prometheus-pve-exporter's default collectors and prints the metrics.

Usage: exporter_scrape.py HOST PORT TOKENID TOKENSECRET NODE
(TOKENID as `user@realm!name`). Exits non-zero when any collector fails, as a scrape would
answer 500.
"""
import sys

from pve_exporter.collector import CollectorsOptions, collect_pve

host, port, tokenid, secret, node = sys.argv[1:6]
user, name = tokenid.split("!", 1)
config = {
    "user": user,
    "token_name": name,
    "token_value": secret,
    "verify_ssl": False,
    "port": int(port),
}
# The exporter's defaults (`pve_exporter.cli`): every collector on.
options = CollectorsOptions(
    status=True, version=True, subscription=True, node=True, cluster=True,
    resources=True, backup_info=True, config=True, replication=True, qdevice=True,
)
sys.stdout.write(collect_pve(config, host, True, node, options).decode())
