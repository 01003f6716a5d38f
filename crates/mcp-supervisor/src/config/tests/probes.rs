//! The probe keys of `[supervisor]` and `[connections.NAME]`.

use std::time::Duration;

use super::*;
use crate::config::{ProbeMode, ProbeSettings};

#[test]
fn probes_default_on_and_each_connection_may_tune_its_own() {
    let config = load(
        "[supervisor]\nprobe_after = \"1s\"\nmax_probes = 10\n\
         [connections.plain]\ntransport = \"stdio\"\ncommand = \"srv\"\n\
         [connections.quiet]\ntransport = \"stdio\"\ncommand = \"srv\"\nprobe = \"off\"\n\
         [connections.eager]\ntransport = \"http\"\nurl = \"https://example.com/mcp\"\n\
         probe_after = \"500ms\"\nprobe_every = \"1s\"\n",
    )
    .unwrap();
    assert_eq!(load("").unwrap().supervisor.probe, ProbeSettings::default());
    let inherited = ProbeSettings {
        mode: ProbeMode::Auto,
        after: Duration::from_secs(1),
        every: Duration::from_secs(5),
        max: 10,
    };
    assert_eq!(config.supervisor.probe, inherited);
    let probe = |name: &str| {
        config
            .connections
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .probe
    };
    assert_eq!(probe("plain"), inherited);
    assert_eq!(
        probe("quiet"),
        ProbeSettings {
            mode: ProbeMode::Off,
            ..inherited
        }
    );
    assert_eq!(
        probe("eager"),
        ProbeSettings {
            after: Duration::from_millis(500),
            every: Duration::from_secs(1),
            ..inherited
        }
    );
}

#[test]
fn bad_probe_keys_name_their_key() {
    for (text, expected) in [
        (
            "[supervisor]\nprobe = \"sometimes\"",
            "supervisor.probe: unknown value \"sometimes\"; expected \"auto\" or \"off\"",
        ),
        (
            "[supervisor]\nprobe_after = \"10s\"",
            "supervisor.probe_every: must be at least probe_after (5s < 10s)",
        ),
        ("[supervisor]\nmax_probes = 0", "supervisor.max_probes"),
        (
            "[connections.a]\ntransport = \"stdio\"\ncommand = \"srv\"\nprobe_every = \"1s\"\nprobe_after = \"2s\"",
            "connections.a.probe_every: must be at least probe_after (1s < 2s)",
        ),
        ("[supervisor]\nprobes = \"off\"", "probes"),
    ] {
        let error = load(text).unwrap_err().to_string();
        assert!(error.contains(expected), "{text}: {error}");
    }
}
