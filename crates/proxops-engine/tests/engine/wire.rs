//! The wire forms the drivers produce for the example repository.

use crate::support::homelab;
use proxops_engine::desired::{Compare, Context, artifact, guest, identity_tag};

fn render(pairs: impl IntoIterator<Item = (String, String)>) -> String {
    pairs
        .into_iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

#[test]
fn homelab_create_parameters() {
    let (_, graphs) = homelab();
    let (cluster, graph) = graphs.iter().find(|(c, _)| c == "home").unwrap();
    let cx = Context::new(cluster, graph);
    let of = |kind: &str, name: &str| graph.resource(graph.find(kind, name).unwrap());
    let jumpbox = guest(&cx, of("VM", "jumpbox")).unwrap();
    insta::assert_snapshot!(render(jumpbox.create_config()), @r"
        agent=1
        boot=order=scsi0;ide2
        cores=2
        cpu=host
        description=SSH jumpbox, installed from the netinst ISO
        ide2=local:iso/debian-13.2.0-amd64-netinst.iso,media=cdrom
        machine=q35
        memory=2048
        name=jumpbox
        net0=virtio,bridge=vmbr0,tag=10,firewall=1
        onboot=1
        scsi0=local-lvm:32,iothread=1,discard=on
        scsihw=virtio-scsi-single
        tablet=1
        tags=admin;proxops;proxops.home.vm.jumpbox
        vga=std
    ");
    let pihole = guest(&cx, of("LXC", "pihole")).unwrap();
    insta::assert_snapshot!(render(pihole.create_config()), @r"
        arch=amd64
        cores=1
        description=Pi-hole DNS for home.lan
        hostname=pihole
        memory=512
        nameserver=1.1.1.1 9.9.9.9
        net0=name=eth0,bridge=vmbr0,tag=20,hwaddr=BC:24:11:20:00:53,firewall=1,ip=10.10.20.53/24,gw=10.10.20.1
        onboot=1
        ostemplate=local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst
        pool=services
        protection=1
        rootfs=local-lvm:8
        searchdomain=home.lan
        startup=order=1,up=15
        swap=256
        tags=dns;infra;proxops;proxops.home.lxc.pihole
        unprivileged=1
    ");
    let k3s = guest(&cx, of("VM", "k3s-server-01")).unwrap();
    let source = k3s.clone.as_ref().unwrap();
    assert_eq!((source.vmid, source.node.as_str()), (9000, "pve1"));
    // After the clone, the planner diffs against the clone's live config; what a clone must
    // set is everything but disks (the template brings them).
    assert!(k3s.owned.iter().all(|o| o.compare != Compare::Disk));
    insta::assert_snapshot!(render(k3s.create_config()), @r"
        agent=1
        ciuser=debian
        cores=2
        cpu=host
        description=k3s server (control plane)
        ide2=local-lvm:cloudinit
        ipconfig0=ip=10.10.10.110/24,gw=10.10.10.1
        memory=4096
        name=k3s-server-01
        nameserver=10.10.20.53
        net0=virtio=BC:24:11:10:01:10,bridge=vmbr0,tag=10
        onboot=1
        searchdomain=home.lan
        sshkeys=ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAICgk%2FuYqyivLPEvfGtyhotPwJ2%2B41CwEtBONZXjx6jCp%20admin%40workstation
        startup=order=10
        tags=k3s;control-plane;proxops;proxops.home.vm.k3s-server-01
    ");
    let iso = artifact(of("ISO", "debian-13-netinst")).unwrap();
    assert_eq!(iso.volid, "local:iso/debian-13.2.0-amd64-netinst.iso");
    insta::assert_snapshot!(render(iso.download), @r"
        content=iso
        filename=debian-13.2.0-amd64-netinst.iso
        url=https://cdimage.debian.org/debian-cd/current/amd64/iso-cd/debian-13.2.0-amd64-netinst.iso
    ");
}

#[test]
fn ownership_tags_and_templates() {
    assert_eq!(
        identity_tag("home", "TemplateVM", "debian-13-cloud-tpl"),
        "proxops.home.templatevm.debian-13-cloud-tpl"
    );
    let (_, graphs) = homelab();
    let (cluster, graph) = graphs.iter().find(|(c, _)| c == "home").unwrap();
    let cx = Context::new(cluster, graph);
    let tpl = guest(
        &cx,
        graph.resource(graph.find("TemplateVM", "debian-13-cloud-tpl").unwrap()),
    )
    .unwrap();
    assert!(tpl.template);
    assert_eq!(tpl.power, None);
    let tags = tpl.owned("tags").unwrap();
    assert_eq!(tags.compare, Compare::Tags);
    assert!(
        tags.value
            .ends_with(";proxops;proxops.home.templatevm.debian-13-cloud-tpl"),
        "{}",
        tags.value
    );
}

#[test]
fn container_ipv6_goes_to_ip6_and_gw6() {
    let tpl = super::support::manifest(
        "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: t\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: t.tar.zst\n  url: https://example.invalid/t.tar.zst\n",
    );
    let ct = super::support::manifest(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: c\nspec:\n  node: pve1\n  vmid: 200\n  template: t\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n  networks:\n    - bridge: vmbr0\n      ip: 10.0.0.5/24\n      gw: 10.0.0.1\n      ip6: 2001:db8::5/64\n      gw6: 2001:db8::1\n",
    );
    let graph =
        proxops_graph::Graph::build(&proxops_model::Registry::builtin(), &[tpl, ct.clone()])
            .unwrap();
    let cx = Context::new("t", &graph);
    let desired = guest(&cx, &ct).unwrap();
    let net0 = &desired.owned("net0").unwrap().value;
    assert!(
        net0.ends_with("ip=10.0.0.5/24,gw=10.0.0.1,ip6=2001:db8::5/64,gw6=2001:db8::1"),
        "{net0}"
    );
}
