use super::*;

fn h(hours: u64) -> Duration {
    Duration::from_secs(hours * 3600)
}

#[test]
fn go_style_durations() {
    assert_eq!(parse_duration("168h").unwrap(), h(168));
    assert_eq!(parse_duration("90m").unwrap(), Duration::from_secs(5400));
    assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
    assert_eq!(parse_duration("45s").unwrap(), Duration::from_secs(45));
    assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
    assert_eq!(
        parse_duration("2h45m30s").unwrap(),
        Duration::from_secs(9930)
    );
    assert!(
        parse_duration("0s")
            .unwrap_err()
            .contains("longer than zero")
    );
    assert!(parse_duration("168").unwrap_err().contains("\"168\""));
    assert!(parse_duration("-1h").is_err());
    assert!(parse_duration("soon").is_err());
    assert_eq!(format_duration(h(168)), "168h");
    assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
    assert_eq!(format_duration(Duration::from_secs(45)), "45s");
}

#[test]
fn renew_before_forms() {
    assert_eq!(RenewBefore::parse("20%").unwrap(), RenewBefore::Percent(20));
    assert_eq!(RenewBefore::parse("4h").unwrap(), RenewBefore::Fixed(h(4)));
    assert!(RenewBefore::parse("100%").is_err());
    assert!(RenewBefore::parse("0%").is_err());
    assert_eq!(
        RenewBefore::Percent(20).before(TimeDelta::hours(24)),
        TimeDelta::minutes(288)
    );
    assert_eq!(
        RenewBefore::Fixed(h(4)).before(TimeDelta::hours(24)),
        TimeDelta::hours(4)
    );
}

#[test]
fn defaults_are_kubevirts() {
    let l = CertificateArgs::default().lifetimes().unwrap();
    assert_eq!(l.ca, TimeDelta::hours(168));
    assert_eq!(l.serving, TimeDelta::hours(24));
    assert_eq!(l.renew_before, RenewBefore::Percent(20));
}

#[test]
fn start_up_refuses_inconsistent_lifetimes() {
    let e = Lifetimes::new(h(24), h(48), RenewBefore::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("--cert-duration (CERT_DURATION) 48h")
    );
    assert!(e.to_string().contains("--ca-duration (CA_DURATION) 24h"));
    let e = Lifetimes::new(h(168), h(24), RenewBefore::Fixed(h(24))).unwrap_err();
    assert!(e.to_string().contains("--renew-before (RENEW_BEFORE) 24h"));
    assert!(e.to_string().contains("serving certificate lifetime 24h"));
    assert!(Lifetimes::new(h(168), h(168), RenewBefore::Fixed(h(23))).is_ok());
}

#[test]
fn publish_grace_fits_the_renewal_window() {
    let l = CertificateArgs::default().lifetimes().unwrap();
    assert_eq!(publish_grace(&l), TimeDelta::seconds(10));
    let short = Lifetimes::new(
        Duration::from_secs(90),
        Duration::from_secs(30),
        RenewBefore::Percent(20),
    )
    .unwrap();
    assert_eq!(publish_grace(&short), TimeDelta::seconds(3));
}

#[test]
fn flags_and_environment() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        certs: CertificateArgs,
    }
    let c = Cmd::try_parse_from(["x", "--ca-duration", "3m", "--cert-duration", "1m"]).unwrap();
    assert_eq!(c.certs.ca_duration, Duration::from_secs(180));
    assert_eq!(c.certs.cert_duration, Duration::from_secs(60));
    let e = Cmd::try_parse_from(["x", "--cert-duration", "1 fortnight"])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("--cert-duration"), "{e}");
}

#[test]
fn serving_names_in_cluster_and_out() {
    let l = CertificateArgs::default().lifetimes().unwrap();
    let s = Settings::new("ops", None, l).unwrap();
    let n = s.serving_names();
    assert_eq!(
        n.dns,
        [
            "kubevirt-operator-webhook",
            "kubevirt-operator-webhook.ops",
            "kubevirt-operator-webhook.ops.svc",
            "kubevirt-operator-webhook.ops.svc.cluster.local"
        ]
    );
    assert!(n.ips.is_empty());
    assert_eq!(n.verify_as, "kubevirt-operator-webhook.ops.svc");

    let s = Settings::new("ops", Some("https://127.0.0.1:9443"), l).unwrap();
    let n = s.serving_names();
    assert_eq!(n.ips, ["127.0.0.1".parse::<IpAddr>().unwrap()]);
    assert_eq!(n.verify_as, "127.0.0.1");
    assert_eq!(
        s.webhook_url.as_ref().unwrap().join("/validate"),
        "https://127.0.0.1:9443/validate"
    );

    let s = Settings::new("ops", Some("https://[::1]:9443/"), l).unwrap();
    assert_eq!(s.serving_names().ips, ["::1".parse::<IpAddr>().unwrap()]);
    assert_eq!(
        s.webhook_url.as_ref().unwrap().join("/m"),
        "https://[::1]:9443/m"
    );

    let s = Settings::new("ops", Some("https://hooks.example.com/base/"), l).unwrap();
    assert!(
        s.serving_names()
            .dns
            .contains(&"hooks.example.com".to_owned())
    );
    assert_eq!(
        s.webhook_url.as_ref().unwrap().join("/m"),
        "https://hooks.example.com/base/m"
    );

    assert!(Settings::new("ops", Some("http://127.0.0.1:1"), l).is_err());
    assert!(Settings::new("Ops", None, l).is_err());
}
