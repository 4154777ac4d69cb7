//! The fixed tables pve-firewall `src/PVE/Firewall.pm` checks rules against: its macros
//! (`$pve_fw_macros`, and `$pve_ipv6fw_macros` that replace or add some for IPv6), the ICMP and
//! ICMPv6 type names (`$icmp_type_names`, `$icmpv6_type_names`), and the names PVE reads from
//! the node's `/etc/protocols` and `/etc/services` (`get_etc_protocols`, `get_etc_services`),
//! here as Debian's netbase ships them. Each macro rule is its template's keys other than
//! `action` (always `PARAM`, the rule's own action).

/// A macro: its name and its rules (`key=value` pairs, space-separated).
pub(crate) type Macro = (&'static str, &'static [&'static str]);

pub(crate) const MACROS: &[Macro] = &[
    (
        "Amanda",
        &["dport=10080 proto=udp", "dport=10080 proto=tcp"],
    ),
    ("Auth", &["dport=113 proto=tcp"]),
    ("BGP", &["dport=179 proto=tcp"]),
    (
        "BitTorrent",
        &["dport=6881:6889 proto=tcp", "dport=6881 proto=udp"],
    ),
    (
        "BitTorrent32",
        &["dport=6881:6999 proto=tcp", "dport=6881 proto=udp"],
    ),
    ("CVS", &["dport=2401 proto=tcp"]),
    (
        "Ceph",
        &[
            "dport=6789 proto=tcp",
            "dport=3300 proto=tcp",
            "dport=6800:7300 proto=tcp",
        ],
    ),
    (
        "Citrix",
        &[
            "dport=1494 proto=tcp",
            "dport=1604 proto=udp",
            "dport=2598 proto=tcp",
        ],
    ),
    ("DAAP", &["dport=3689 proto=tcp", "dport=3689 proto=udp"]),
    ("DCC", &["dport=6277 proto=tcp"]),
    ("DHCPfwd", &["dport=67:68 proto=udp sport=67:68"]),
    ("DNS", &["dport=53 proto=udp", "dport=53 proto=tcp"]),
    ("Distcc", &["dport=3632 proto=tcp"]),
    ("FTP", &["dport=21 proto=tcp"]),
    ("Finger", &["dport=79 proto=tcp"]),
    (
        "GNUnet",
        &[
            "dport=2086 proto=tcp",
            "dport=2086 proto=udp",
            "dport=1080 proto=tcp",
            "dport=1080 proto=udp",
        ],
    ),
    ("GRE", &["proto=47"]),
    ("Git", &["dport=9418 proto=tcp"]),
    ("HKP", &["dport=11371 proto=tcp"]),
    ("HTTP", &["dport=80 proto=tcp"]),
    ("HTTPS", &["dport=443 proto=tcp"]),
    ("ICPV2", &["dport=3130 proto=udp"]),
    ("ICQ", &["dport=5190 proto=tcp"]),
    ("IMAP", &["dport=143 proto=tcp"]),
    ("IMAPS", &["dport=993 proto=tcp"]),
    ("IPIP", &["proto=94"]),
    ("IPsec", &["dport=500 proto=udp sport=500", "proto=50"]),
    ("IPsecah", &["dport=500 proto=udp sport=500", "proto=51"]),
    (
        "IPsecnat",
        &["dport=500 proto=udp", "dport=4500 proto=udp", "proto=50"],
    ),
    ("IRC", &["dport=6667 proto=tcp"]),
    ("Jetdirect", &["dport=9100 proto=tcp"]),
    ("L2TP", &["dport=1701 proto=udp"]),
    ("LDAP", &["dport=389 proto=tcp"]),
    ("LDAPS", &["dport=636 proto=tcp"]),
    ("MDNS", &["dport=5353 proto=udp"]),
    ("MSNP", &["dport=1863 proto=tcp"]),
    ("MSSQL", &["dport=1433 proto=tcp"]),
    (
        "Mail",
        &[
            "dport=25 proto=tcp",
            "dport=465 proto=tcp",
            "dport=587 proto=tcp",
        ],
    ),
    ("Munin", &["dport=4949 proto=tcp"]),
    ("MySQL", &["dport=3306 proto=tcp"]),
    ("NNTP", &["dport=119 proto=tcp"]),
    ("NNTPS", &["dport=563 proto=tcp"]),
    ("NTP", &["dport=123 proto=udp"]),
    ("OSPF", &["proto=89"]),
    ("OpenVPN", &["dport=1194 proto=udp"]),
    ("PCA", &["dport=5632 proto=udp", "dport=5631 proto=tcp"]),
    ("PMG", &["dport=8006 proto=tcp"]),
    ("POP3", &["dport=110 proto=tcp"]),
    ("POP3S", &["dport=995 proto=tcp"]),
    ("PPtP", &["proto=47", "dport=1723 proto=tcp"]),
    ("Ping", &["dport=echo-request proto=icmp"]),
    ("PostgreSQL", &["dport=5432 proto=tcp"]),
    ("Printer", &["dport=515 proto=tcp"]),
    ("RDP", &["dport=3389 proto=tcp"]),
    ("RIP", &["dport=520 proto=udp"]),
    ("RNDC", &["dport=953 proto=tcp"]),
    ("Razor", &["dport=2703 proto=tcp"]),
    ("Rdate", &["dport=37 proto=tcp"]),
    ("Rsync", &["dport=873 proto=tcp"]),
    ("SANE", &["dport=6566 proto=tcp"]),
    (
        "SMB",
        &[
            "dport=135,445 proto=udp",
            "dport=137:139 proto=udp",
            "dport=1024:65535 proto=udp sport=137",
            "dport=135,139,445 proto=tcp",
        ],
    ),
    ("SMBswat", &["dport=901 proto=tcp"]),
    ("SMTP", &["dport=25 proto=tcp"]),
    ("SMTPS", &["dport=465 proto=tcp"]),
    ("SNMP", &["dport=161:162 proto=udp", "dport=161 proto=tcp"]),
    ("SPAMD", &["dport=783 proto=tcp"]),
    ("SPICEproxy", &["dport=3128 proto=tcp"]),
    ("SSH", &["dport=22 proto=tcp"]),
    ("SVN", &["dport=3690 proto=tcp"]),
    (
        "SixXS",
        &[
            "dport=3874 proto=tcp",
            "dport=3740 proto=udp",
            "proto=41",
            "dport=5072,8374 proto=udp",
        ],
    ),
    ("Squid", &["dport=3128 proto=tcp"]),
    ("Submission", &["dport=587 proto=tcp"]),
    ("Syslog", &["dport=514 proto=udp", "dport=514 proto=tcp"]),
    ("TFTP", &["dport=69 proto=udp"]),
    ("Telnet", &["dport=23 proto=tcp"]),
    ("Telnets", &["dport=992 proto=tcp"]),
    ("Time", &["dport=37 proto=tcp"]),
    (
        "Trcrt",
        &[
            "dport=33434:33524 proto=udp",
            "dport=echo-request proto=icmp",
        ],
    ),
    ("VNC", &["dport=5900:5999 proto=tcp"]),
    ("VNCL", &["dport=5500 proto=tcp"]),
    ("Web", &["dport=80 proto=tcp", "dport=443 proto=tcp"]),
    ("Webcache", &["dport=8080 proto=tcp"]),
    ("Webmin", &["dport=10000 proto=tcp"]),
    ("Whois", &["dport=43 proto=tcp"]),
];
pub(crate) const MACROS_V6: &[Macro] = &[
    ("DHCPv6", &["dport=546:547 proto=udp sport=546:547"]),
    (
        "NeighborDiscovery",
        &[
            "dport=router-solicitation proto=icmpv6",
            "dport=router-advertisement proto=icmpv6",
            "dport=neighbor-solicitation proto=icmpv6",
            "dport=neighbor-advertisement proto=icmpv6",
        ],
    ),
    ("Ping", &["dport=echo-request proto=icmpv6"]),
    (
        "Trcrt",
        &[
            "dport=33434:33524 proto=udp",
            "dport=echo-request proto=icmpv6",
        ],
    ),
];

/// `$icmp_type_names` (`iptables -p icmp -h`).
pub(crate) const ICMP_TYPES: &str = concat!(
    "TOS-host-redirect TOS-host-unreachable TOS-network-redirect TOS-network-unreachable ",
    "address-mask-reply address-mask-request any communication-prohibited destination- ",
    "unreachable echo-reply echo-request fragmentation-needed host-precedence-violation host- ",
    "prohibited host-redirect host-unknown host-unreachable ip-header-bad network-prohibited ",
    "network-redirect network-unknown network-unreachable parameter-problem port-unreachable ",
    "precedence-cutoff protocol-unreachable redirect required-option-missing router- ",
    "advertisement router-solicitation source-quench source-route-failed time-exceeded ",
    "timestamp-reply timestamp-request ttl-zero-during-reassembly ttl-zero-during-transit",
);

/// `$icmpv6_type_names` (`ip6tables -p icmpv6 -h`).
pub(crate) const ICMPV6_TYPES: &str = concat!(
    "address-unreachable bad-header beyond-scope communication-prohibited destination- ",
    "unreachable echo-reply echo-request failed-policy neighbor-advertisement neighbor- ",
    "solicitation neighbour-advertisement neighbour-solicitation no-route packet-too-big ",
    "parameter-problem port-unreachable redirect reject-route router-advertisement router- ",
    "solicitation time-exceeded ttl-zero-during-reassembly ttl-zero-during-transit unknown- ",
    "header-type unknown-option",
);

/// `/etc/protocols` as `name:number` (`parse_protocol_file`; `icmpv6` is added by
/// `get_etc_protocols`).
pub(crate) const PROTOCOLS: &str = concat!(
    "ip:0 hopopt:0 icmp:1 igmp:2 ggp:3 ipencap:4 st:5 tcp:6 egp:8 igp:9 pup:12 udp:17 hmp:20 ",
    "xns-idp:22 rdp:27 iso-tp4:29 dccp:33 xtp:36 ddp:37 idpr-cmtp:38 ipv6:41 ipv6-route:43 ",
    "ipv6-frag:44 idrp:45 rsvp:46 gre:47 esp:50 ah:51 skip:57 ipv6-icmp:58 ipv6-nonxt:59 ",
    "ipv6-opts:60 rspf:73 vmtp:81 eigrp:88 ospf:89 ax.25:93 ipip:94 etherip:97 encap:98 pim:103 ",
    "ipcomp:108 vrrp:112 l2tp:115 isis:124 sctp:132 fc:133 mobility-header:135 udplite:136 ",
    "mpls-in-ip:137 manet:138 hip:139 shim6:140 wesp:141 rohc:142 ethernet:143 mptcp:262",
);

/// The service names of `/etc/services` lines for tcp, udp or sctp (`get_etc_services`'s
/// `byname`).
pub(crate) const SERVICES: &str = concat!(
    "acr-nema afpovertcp afs3-bos afs3-callback afs3-fileserver afs3-kaserver afs3-prserver ",
    "afs3-rmtsys afs3-update afs3-vlserver afs3-volser amanda amandaidx amidxtape amqp amqps ",
    "asf-rmcp asp auth babel bacula-dir bacula-fd bacula-sd bbs bgp bgpd biff binkp bootpc ",
    "bootps canna cfengine chargen cisco-sccp clc-build-daemon clearcase cmip-agent cmip-man ",
    "codaauth2 codasrv codasrv-se csync2 cvspserver daap datametrics daytime db-lsp dcap ",
    "dhcpv6-client dhcpv6-server dicom dict dircproxy discard distcc domain domain-s echo epmap ",
    "epmd exec f5-globalsite f5-iquery fax fido finger font-service freeciv fsp ftp ftp-data ",
    "ftps ftps-data gdomap gds-db git gnunet gnutella-rtr gnutella-svc gopher gpsd gris ",
    "groupwise gsidcap gsiftp gsigatekeeper hkp http http-alt https hylafax iax icpv2 imap2 ",
    "imaps ingreslock ipp iprop ipsec-nat-t ipx ircd ircs-u isakmp iscsi-target isisd isns iso- ",
    "tsap kamanda kerberos kerberos-adm kerberos-master kerberos4 kermit klogin kpasswd krb- ",
    "prop kshell l2f ldap ldaps ldp login lotusnote mailq mdns microsoft-ds moira-db moira- ",
    "update moira-ureg mon ms-sql-m ms-sql-s ms-wbt-server mtn munin mysql mysql-proxy nbd ",
    "netbios-dgm netbios-ns netbios-ssn netstat nfs nntp nntps nqs nrpe nsca ntalk ntp ntske ",
    "nut omniorb openvpn ospf6d ospfapi ospfd passwd-server pawserv pop3 pop3s poppassd ",
    "postgresql predict printer proofd ptp-event ptp-general puppet qmqp qmtp qotd radius ",
    "radius-acct radmin-port redis remctl ripd ripngd rmiregistry rmtcfg rootd route ",
    "rpc2portmap rplay rsync rtcm-sc104 rtsp sa-msg-port saft sane-port sge-execd sge-qmaster ",
    "sgi-cad sgi-cmsd sgi-crsd sgi-gcd shell sieve silc sip sip-tls skkserv smtp smux snmp ",
    "snmp-trap snpp socks spamd ssh submission submissions sunrpc supfiledbg supfilesrv suucp ",
    "svn svrloc syslog syslog-tls sysrqd systat tacacs talk tcpmux telnet telnets tfido tftp ",
    "time tinc tproxy uucp venus venus-se webmin who whois wnn6 x11 x11-1 x11-2 x11-3 x11-4 ",
    "x11-5 x11-6 x11-7 xdmcp xinetd xmms2 xmpp-client xmpp-server xtel xtelw z3950 zabbix-agent ",
    "zabbix-trapper zebra zebrasrv zephyr-clt zephyr-hm zephyr-srv zope zope-ftp zserv",
);
