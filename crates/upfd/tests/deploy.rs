//! The operator surface: the Helm chart (deploy/helm/upfd), the Dockerfile, the systemd
//! unit (deploy/systemd) and the Grafana dashboard (deploy/grafana), checked with the tools
//! scripts/ops-tools.sh installs at pinned versions into .tools/ (scripts/deps.sh runs it):
//!
//! - the chart: `helm lint --strict` and `helm template` with the default values (and the
//!   SMFs N4 admits, which the chart requires) and with the ServiceMonitor, a
//!   PersistentVolumeClaim, privileged/host-device/IPv6 N3, ports and state directory set in
//!   `config`, N4 on the pod network, and a token Secret of the user's with the API open to
//!   named namespaces; every manifest validated by `kubeconform -strict` against the
//!   Kubernetes schemas (kubernetes-validate, two versions) and the CRDs' (Multus'
//!   NetworkAttachmentDefinition, prometheus-operator's ServiceMonitor); what the schemas
//!   cannot see checked here (the CNI configurations inside the NetworkAttachmentDefinitions,
//!   the Multus annotation against the interfaces upfd is configured with, probes, ports,
//!   volumes and the token's Secret against upfd.yaml, the NetworkPolicy's rules against N4's
//!   peers and the API's namespaces); the install notes naming the SMFs admitted; values
//!   that cannot work (no SMF peers among them) refused with the key to set; and the
//!   upfd.yaml the chart renders accepted by `upfd check-config`;
//! - the Dockerfile: hadolint; the build stage builds what scripts/demo.sh (README) builds
//!   and upfctl, from workspace members; every COPY source exists and is not in
//!   .dockerignore; every library upfd loads is in debian:12-slim (the Priority: required
//!   packages, apt and their dependencies) or installed by the runtime stage. No image is
//!   built here (that needs a container engine and the base images);
//! - the systemd unit: `systemd-analyze verify` (silent) in a scratch root, and its keys;
//! - the dashboard: its structure (the `${datasource}` variable on every query) and every
//!   PromQL expression parsed by `promtool check rules`.
//!
//! A missing tool makes a test print SKIP and pass, unless `UPF_REQUIRE_ORACLES=1`, when it
//! fails saying how to install it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;
use serde_json::Value;

const UPFD: &str = env!("CARGO_BIN_EXE_upfd");

/// The Kubernetes versions the manifests are validated against (scripts/ops-tools.sh,
/// KUBERNETES_SCHEMA_VERSIONS).
const KUBERNETES: [&str; 2] = ["1.30.0", "1.37.0"];

/// The capabilities upfd runs with (chart and systemd unit alike).
const CAPABILITIES: [&str; 6] = [
    "NET_ADMIN",
    "BPF",
    "PERFMON",
    "SYS_RESOURCE",
    "NET_RAW",
    "IPC_LOCK",
];

const INSTALL: &str = "scripts/ops-tools.sh installs it (scripts/deps.sh runs that script)";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn chart() -> PathBuf {
    repo().join("deploy/helm/upfd")
}

/// Says that `what` is missing: a failure under `UPF_REQUIRE_ORACLES=1`, else a SKIP line.
fn missing(what: &str, how: &str) -> Option<PathBuf> {
    if std::env::var("UPF_REQUIRE_ORACLES").as_deref() == Ok("1") {
        panic!("{what} missing and UPF_REQUIRE_ORACLES=1: {how}");
    }
    println!("SKIP: {what} missing: {how}");
    None
}

/// A tool of .tools/bin.
fn tool(name: &str) -> Option<PathBuf> {
    let p = repo().join(".tools/bin").join(name);
    if p.exists() {
        Some(p)
    } else {
        missing(&format!(".tools/bin/{name}"), INSTALL)
    }
}

/// A command on PATH.
fn on_path(name: &str, how: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let p = d.join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    missing(name, how)
}

/// The kubeconform schemas of scripts/ops-tools.sh.
fn schemas() -> Option<PathBuf> {
    let s = repo().join(".tools/kubeconform-schemas");
    let mut need: Vec<PathBuf> = KUBERNETES
        .iter()
        .map(|v| s.join(format!("v{v}-standalone-strict/deployment-apps-v1.json")))
        .collect();
    need.push(s.join("crds/k8s.cni.cncf.io/networkattachmentdefinition_v1.json"));
    need.push(s.join("crds/monitoring.coreos.com/servicemonitor_v1.json"));
    match need.iter().find(|p| !p.is_file()) {
        None => Some(s),
        Some(p) => missing(&p.display().to_string(), INSTALL),
    }
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `cmd`, which must succeed; its stdout.
fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A directory of its own for a test's files, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("upfd-deploy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The documents of a YAML stream, as JSON values (empty ones left out).
fn yaml_docs(s: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(s)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("YAML: {e}\n{s}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// The SMFs N4 admits in every rendering but the one that checks the chart requires them.
const PEERS: &str = "--set=config.n4.allowed_peers={198.51.100.0/24}";

/// `helm template` of the chart with the SMF peers of [`PEERS`] and `args` (which may set
/// them otherwise).
fn helm_template(helm: &Path, args: &[&str]) -> Output {
    helm_template_of(helm, &chart(), &[&[PEERS], args].concat())
}

fn helm_template_of(helm: &Path, chart: &Path, args: &[&str]) -> Output {
    run(Command::new(helm)
        .args(["template", "upf"])
        .arg(chart)
        .args(["--namespace", "upf"])
        .args(args))
}

/// The chart's variants: name, `helm` value flags.
const VARIANTS: &[(&str, &[&str])] = &[
    ("default", &[]),
    (
        "servicemonitor-pvc",
        &[
            "--set=serviceMonitor.enabled=true",
            "--set=serviceMonitor.labels.release=prometheus",
            "--set=state.persistence.enabled=true",
            "--set=state.persistence.storageClassName=fast",
        ],
    ),
    (
        "privileged-host-device-existing-claim",
        &[
            "--set=securityContext.privileged=true",
            "--set=networks.n3.cni=host-device",
            "--set=networks.n3.device=ens1f0",
            "--set=networks.n6.cni=host-device",
            "--set=networks.n6.device=ens1f1",
            "--set=networks.n6.routes[0].dst=0.0.0.0/0",
            "--set=networks.n6.routes[0].gw=10.100.6.1",
            "--set=state.persistence.enabled=true",
            "--set=state.persistence.existingClaim=upf-state",
            "--set=bpffs.mountPropagation=Bidirectional",
            "--set=networks.n3.address=2001:db8:3::10/64",
        ],
    ),
    (
        "ports-and-state-directory-from-config",
        &[
            "--set=config.api.listen=0.0.0.0:9200",
            "--set=config.n4.port=8806",
            "--set=config.state.directory=/state",
        ],
    ),
    (
        "n4-on-pod-network-ipvlan",
        &[
            "--set=networks.n4.enabled=false",
            "--set=networks.n3.cni=ipvlan",
            "--set=networks.n3.mode=l2",
            "--set=config.node_id=upf1.example.org",
            "--set=config.n4.address=10.0.0.5",
            "--set=config.datapath.mode=none",
            "--set=bpffs.enabled=false",
        ],
    ),
    (
        "token-secret-of-the-user-api-namespaces-smf-pods",
        &[
            "--set=api.token.existingSecret=upf-api-token",
            "--set=api.token.existingSecretKey=bearer",
            "--set=api.tls.existingSecret=upf-api-tls",
            "--set=networkPolicy.api.namespaces={ops,monitoring}",
            "--set=config.n4.allowed_peers={198.51.100.0/24,2001:db8:4::/64}",
            "--set=networkPolicy.n4.cidrs={198.51.100.0/25}",
            "--set=networkPolicy.n4.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=core",
            "--set=networkPolicy.n4.podSelector.matchLabels.app=smf",
            "--set=serviceMonitor.enabled=true",
            "--set=serviceMonitor.labels.release=prometheus",
        ],
    ),
];

fn kinds(docs: &[Value]) -> BTreeMap<String, usize> {
    let mut k = BTreeMap::new();
    for d in docs {
        *k.entry(d["kind"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    k
}

fn find<'a>(docs: &'a [Value], kind: &str, name_suffix: &str) -> Option<&'a Value> {
    docs.iter().find(|d| {
        d["kind"] == kind
            && d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with(name_suffix))
    })
}

/// Seconds of a duration of upfd's configuration ("30s", "2m", "500ms").
fn seconds(d: &str) -> f64 {
    let (n, unit) = d.split_at(d.find(|c: char| !c.is_ascii_digit()).unwrap_or(d.len()));
    let n: f64 = n.parse().unwrap();
    match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        _ => panic!("duration {d:?}"),
    }
}

/// What kubeconform cannot see: the objects against one another and against upfd.yaml.
fn check_objects(variant: &str, docs: &[Value]) {
    let ctx = |what: &str| format!("{variant}: {what}");
    let k = kinds(docs);
    let with = |flag: &str| {
        VARIANTS
            .iter()
            .any(|(n, a)| *n == variant && a.contains(&flag))
    };
    assert_eq!(k.get("Deployment"), Some(&1), "{}", ctx("one Deployment"));
    assert_eq!(k.get("ConfigMap"), Some(&1), "{}", ctx("one ConfigMap"));
    assert_eq!(
        k.contains_key("ServiceMonitor"),
        with("--set=serviceMonitor.enabled=true"),
        "{}",
        ctx("ServiceMonitor exactly when enabled")
    );
    assert_eq!(
        k.contains_key("PersistentVolumeClaim"),
        with("--set=state.persistence.enabled=true")
            && !with("--set=state.persistence.existingClaim=upf-state"),
        "{}",
        ctx("a PVC exactly when persistence is on without an existing claim")
    );

    // upfd.yaml as the pod reads it.
    let cm = find(docs, "ConfigMap", "").unwrap();
    let config: Value = serde_norway::from_str(cm["data"]["upfd.yaml"].as_str().unwrap()).unwrap();
    let port_in = |key: &str| -> u64 {
        config["api"][key]
            .as_str()
            .and_then(|l| l.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{}", ctx(&format!("api.{key} IP:port in upfd.yaml"))))
    };
    let (api_port, probe_port) = (port_in("listen"), port_in("probe_address"));
    assert_ne!(api_port, probe_port, "{}", ctx("two listeners"));

    let dep = find(docs, "Deployment", "").unwrap();
    assert_eq!(dep["spec"]["replicas"], 1, "{}", ctx("one replica"));
    assert_eq!(
        dep["spec"]["strategy"]["type"],
        "Recreate",
        "{}",
        ctx("Recreate")
    );
    let pod = &dep["spec"]["template"];
    let spec = &pod["spec"];
    let c = spec["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "upfd")
        .unwrap();
    let port_of = |name: &str| {
        c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{}", ctx(&format!("container port {name}"))))
            .clone()
    };
    assert_eq!(
        port_of("api")["containerPort"],
        api_port,
        "{}",
        ctx("API port = api.listen's")
    );
    assert_eq!(
        port_of("pfcp")["containerPort"],
        config["n4"]["port"],
        "{}",
        ctx("PFCP port = n4.port")
    );
    assert_eq!(port_of("pfcp")["protocol"], "UDP");
    assert_eq!(
        port_of("probe")["containerPort"],
        probe_port,
        "{}",
        ctx("probe port = api.probe_address's")
    );
    // The kubelet sends no token: the probes go to the plain listener.
    for (probe, path) in [
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
        ("startupProbe", "/healthz"),
    ] {
        assert_eq!(c[probe]["httpGet"]["path"], path, "{}", ctx(probe));
        assert_eq!(c[probe]["httpGet"]["port"], "probe", "{}", ctx(probe));
    }
    for r in ["requests", "limits"] {
        assert!(
            c["resources"][r]["memory"].is_string(),
            "{}",
            ctx(&format!("resources.{r}.memory"))
        );
    }
    let sc = &c["securityContext"];
    if with("--set=securityContext.privileged=true") {
        assert_eq!(sc["privileged"], true, "{}", ctx("privileged"));
    } else {
        assert_eq!(sc["privileged"], false, "{}", ctx("not privileged"));
        let add: BTreeSet<&str> = sc["capabilities"]["add"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            add,
            CAPABILITIES.into_iter().collect(),
            "{}",
            ctx("capabilities")
        );
        assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    }
    // Whatever upfd is told to stop within, the kubelet waits longer.
    let release = config["n4"]["graceful_release_period"]
        .as_str()
        .map(seconds)
        .unwrap_or(30.0);
    assert!(
        spec["terminationGracePeriodSeconds"].as_f64().unwrap() > release,
        "{}",
        ctx("terminationGracePeriodSeconds above n4.graceful_release_period")
    );

    // Volumes: the configuration, the state directory, bpffs.
    let mounts = |c: &Value| -> BTreeMap<String, String> {
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_string(),
                    m["mountPath"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let volumes: BTreeMap<String, Value> = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap().to_string(), v.clone()))
        .collect();
    let m = mounts(c);
    assert_eq!(m["config"], "/etc/upfd");
    // upfd.yaml and the API's token in the one volume: the token from the Secret the chart
    // renders, or the user's, at the path api.token_file names.
    let sources = volumes["config"]["projected"]["sources"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", ctx("a projected config volume")));
    let cm_item = sources
        .iter()
        .find_map(|s| s["configMap"].as_object())
        .unwrap();
    assert_eq!(
        cm_item["name"],
        cm["metadata"]["name"],
        "{}",
        ctx("ConfigMap")
    );
    assert_eq!(cm_item["items"][0]["path"], "upfd.yaml");
    let secret = sources
        .iter()
        .find_map(|s| s["secret"].as_object())
        .unwrap_or_else(|| panic!("{}", ctx("the token's Secret in the config volume")));
    let token_item = &secret["items"][0];
    assert_eq!(
        config["api"]["token_file"].as_str(),
        Some(format!("/etc/upfd/{}", token_item["path"].as_str().unwrap()).as_str()),
        "{}",
        ctx("api.token_file is where the Secret's key is mounted")
    );
    // TLS on the API's port from the user's kubernetes.io/tls Secret, mounted where
    // api.tls_cert_file and api.tls_key_file say; none without it.
    let tls_sources: Vec<&Value> = sources
        .iter()
        .filter(|s| s["secret"]["name"] == "upf-api-tls")
        .collect();
    if with("--set=api.tls.existingSecret=upf-api-tls") {
        assert_eq!(
            tls_sources.len(),
            1,
            "{}",
            ctx("the TLS Secret in the config volume")
        );
        let items = &tls_sources[0]["secret"]["items"];
        for (i, (key, file)) in [("tls.crt", "tls_cert_file"), ("tls.key", "tls_key_file")]
            .iter()
            .enumerate()
        {
            assert_eq!(items[i]["key"], *key, "{}", ctx("the TLS Secret's keys"));
            assert_eq!(
                config["api"][*file].as_str(),
                Some(format!("/etc/upfd/{}", items[i]["path"].as_str().unwrap()).as_str()),
                "{}",
                ctx("api.tls_* are where the Secret's keys are mounted")
            );
        }
    } else {
        assert!(tls_sources.is_empty(), "{}", ctx("no TLS Secret"));
        assert!(
            config["api"].get("tls_cert_file").is_none(),
            "{}",
            ctx("no TLS without a Secret")
        );
    }
    let rendered_secret = find(docs, "Secret", "");
    if with("--set=api.token.existingSecret=upf-api-token") {
        assert!(
            rendered_secret.is_none(),
            "{}",
            ctx("no Secret of the chart's")
        );
        assert_eq!(
            secret["name"],
            "upf-api-token",
            "{}",
            ctx("the user's Secret")
        );
        assert_eq!(token_item["key"], "bearer", "{}", ctx("the user's key"));
    } else {
        let rs = rendered_secret.unwrap_or_else(|| panic!("{}", ctx("a token Secret")));
        assert_eq!(
            secret["name"],
            rs["metadata"]["name"],
            "{}",
            ctx("Secret name")
        );
        let key = token_item["key"].as_str().unwrap();
        let token = rs["data"][key].as_str().unwrap_or("");
        // base64 of at least 32 random characters.
        assert!(token.len() >= 44, "{}", ctx("a token in the Secret"));
    }
    assert_eq!(
        c["args"],
        serde_json::json!(["--config", "/etc/upfd/upfd.yaml"]),
        "{}",
        ctx("args")
    );
    assert_eq!(
        Some(m["state"].as_str()),
        config["state"]["directory"].as_str(),
        "{}",
        ctx("the state volume is state.directory")
    );
    if with("--set=state.persistence.enabled=true") {
        let claim = volumes["state"]["persistentVolumeClaim"]["claimName"]
            .as_str()
            .unwrap();
        if with("--set=state.persistence.existingClaim=upf-state") {
            assert_eq!(claim, "upf-state");
        } else {
            assert!(find(docs, "PersistentVolumeClaim", "").unwrap()["metadata"]["name"] == claim);
        }
    } else {
        assert!(
            volumes["state"]["emptyDir"].is_object(),
            "{}",
            ctx("emptyDir state")
        );
    }
    if with("--set=bpffs.enabled=false") {
        assert!(!volumes.contains_key("bpffs"));
    } else {
        assert_eq!(volumes["bpffs"]["hostPath"]["path"], "/sys/fs/bpf");
        assert_eq!(m["bpffs"], "/sys/fs/bpf");
    }
    // The init container checks the same file, with the same state directory.
    let init = &spec["initContainers"][0];
    assert_eq!(
        init["command"],
        serde_json::json!(["upfd", "check-config", "/etc/upfd/upfd.yaml"])
    );
    assert_eq!(mounts(init)["state"], m["state"]);

    // Multus: the annotation names the NetworkAttachmentDefinitions rendered, and the
    // interfaces it creates are those upfd.yaml names.
    let nads: BTreeMap<String, &Value> = docs
        .iter()
        .filter(|d| d["kind"] == "NetworkAttachmentDefinition")
        .map(|d| (d["metadata"]["name"].as_str().unwrap().to_string(), d))
        .collect();
    let annotation: Vec<Value> = serde_json::from_str(
        pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
            .as_str()
            .unwrap_or("[]"),
    )
    .unwrap();
    assert_eq!(
        annotation.len(),
        nads.len(),
        "{}",
        ctx("one attachment per NAD")
    );
    let mut interface_of = BTreeMap::new();
    for a in &annotation {
        let name = a["name"].as_str().unwrap();
        let nad = nads
            .get(name)
            .unwrap_or_else(|| panic!("{}", ctx(&format!("NAD {name} rendered"))));
        assert_eq!(a["namespace"], "upf");
        let net = nad["metadata"]["labels"]["upfd.io/network"]
            .as_str()
            .unwrap();
        interface_of.insert(
            net.to_string(),
            a["interface"].as_str().unwrap().to_string(),
        );
        // The CNI configuration, a JSON string no schema looks into.
        let cni: Value = serde_json::from_str(nad["spec"]["config"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{}", ctx(&format!("{name}: CNI config JSON: {e}"))));
        assert_eq!(cni["name"], name);
        assert!(cni["cniVersion"].is_string());
        match cni["type"].as_str().unwrap() {
            "macvlan" | "ipvlan" => assert!(cni["master"].is_string(), "{}", ctx("master")),
            "host-device" => assert!(cni["device"].is_string(), "{}", ctx("device")),
            t => panic!("{}", ctx(&format!("{name}: CNI type {t}"))),
        }
        let addr = cni["ipam"]["addresses"][0]["address"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let configured = match net {
            "n3" if addr.contains(':') => &config["gtpu"]["n3"]["ipv6"],
            "n3" => &config["gtpu"]["n3"]["ipv4"],
            "n4" => &config["n4"]["address"],
            _ => &Value::Null,
        };
        if !configured.is_null() {
            assert_eq!(
                configured.as_str(),
                Some(addr.as_str()),
                "{}",
                ctx(&format!("{net}'s address in upfd.yaml"))
            );
        }
    }
    if config["datapath"]["mode"] == "xdp" {
        for (net, key) in [("n3", "n3_interface"), ("n6", "n6_interface")] {
            assert_eq!(
                config["datapath"][key].as_str(),
                interface_of.get(net).map(|s| s.as_str()),
                "{}",
                ctx(&format!(
                    "datapath.{key} is the {net} attachment's interface"
                ))
            );
        }
    }

    // Services select the pod; the ServiceMonitor selects the API Service's port.
    let pod_labels = &pod["metadata"]["labels"];
    for d in docs.iter().filter(|d| d["kind"] == "Service") {
        for (k, v) in d["spec"]["selector"].as_object().unwrap() {
            assert_eq!(&pod_labels[k], v, "{}", ctx("Service selector"));
        }
        for p in d["spec"]["ports"].as_array().unwrap() {
            let target = p["targetPort"].as_str().unwrap();
            assert_eq!(
                port_of(target)["protocol"],
                p["protocol"],
                "{}",
                ctx("Service port")
            );
        }
    }
    if let Some(sm) = find(docs, "ServiceMonitor", "") {
        let svc = docs
            .iter()
            .find(|d| {
                d["kind"] == "Service"
                    && sm["spec"]["selector"]["matchLabels"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .all(|(k, v)| &d["metadata"]["labels"][k] == v)
            })
            .unwrap_or_else(|| panic!("{}", ctx("a Service the ServiceMonitor selects")));
        let ep = &sm["spec"]["endpoints"][0];
        assert_eq!(ep["path"], "/metrics");
        // Scraped on the plain listener: Prometheus holds no token.
        assert!(
            svc["spec"]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == ep["port"]
                    && p["protocol"] == "TCP"
                    && p["targetPort"] == "probe"),
            "{}",
            ctx("ServiceMonitor on the probe port")
        );
        assert_eq!(sm["metadata"]["labels"]["release"], "prometheus");
    }

    check_network_policy(variant, docs, &config, pod_labels, (api_port, probe_port));
}

/// N4 admitted only from the SMFs' networks, the API only from the namespaces named, the
/// probe port from anywhere; upfd itself admits no SMF but those of n4.allowed_peers.
fn check_network_policy(
    variant: &str,
    docs: &[Value],
    config: &Value,
    pod_labels: &Value,
    (api_port, probe_port): (u64, u64),
) {
    let ctx = |what: &str| format!("{variant}: {what}");
    let set = |prefix: &str| -> Option<Vec<String>> {
        let (_, args) = VARIANTS.iter().find(|(n, _)| *n == variant)?;
        let v = args.iter().find_map(|a| a.strip_prefix(prefix))?;
        let list = v.strip_prefix('{')?.strip_suffix('}')?;
        Some(list.split(',').map(str::to_string).collect())
    };
    let peers: Vec<&str> = config["n4"]["allowed_peers"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p.as_str()).collect())
        .unwrap_or_default();
    assert!(
        !peers.is_empty(),
        "{}",
        ctx("n4.allowed_peers in upfd.yaml")
    );
    let want_peers = set("--set=config.n4.allowed_peers=")
        .unwrap_or_else(|| vec!["198.51.100.0/24".to_string()]);
    assert_eq!(peers, want_peers, "{}", ctx("n4.allowed_peers as given"));

    let policies: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "NetworkPolicy")
        .collect();
    assert_eq!(policies.len(), 1, "{}", ctx("one NetworkPolicy"));
    let np = &policies[0]["spec"];
    for (k, v) in np["podSelector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &pod_labels[k],
            v,
            "{}",
            ctx("NetworkPolicy selects the pod")
        );
    }
    assert_eq!(np["policyTypes"], serde_json::json!(["Ingress"]));
    let rules = np["ingress"].as_array().unwrap();
    // Every rule names its ports (a rule without ports admits every port).
    let rule_for = |proto: &str, port: u64| -> Vec<&Value> {
        rules
            .iter()
            .filter(|r| {
                let ports = r["ports"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{}", ctx("a rule without ports")));
                ports
                    .iter()
                    .any(|p| p["protocol"] == proto && p["port"] == port)
            })
            .collect()
    };
    let n4_port = config["n4"]["port"].as_u64().unwrap_or(8805);
    let n4 = rule_for("UDP", n4_port);
    assert_eq!(n4.len(), 1, "{}", ctx("one N4 rule"));
    let from = n4[0]["from"]
        .as_array()
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| panic!("{}", ctx("N4 admitted from named peers only")));
    let cidrs: Vec<&str> = from
        .iter()
        .filter_map(|f| f["ipBlock"]["cidr"].as_str())
        .collect();
    let want_cidrs = set("--set=networkPolicy.n4.cidrs=").unwrap_or(want_peers);
    assert_eq!(cidrs, want_cidrs, "{}", ctx("N4 from the SMFs' prefixes"));
    let selectors: Vec<&Value> = from.iter().filter(|f| f["ipBlock"].is_null()).collect();
    if variant == "token-secret-of-the-user-api-namespaces-smf-pods" {
        assert_eq!(selectors.len(), 1, "{}", ctx("the SMF pods' peer"));
        assert_eq!(
            selectors[0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "core"
        );
        assert_eq!(selectors[0]["podSelector"]["matchLabels"]["app"], "smf");
    } else {
        assert!(selectors.is_empty(), "{}", ctx("no selector peer"));
    }

    let api = rule_for("TCP", api_port);
    match set("--set=networkPolicy.api.namespaces=") {
        None => assert!(api.is_empty(), "{}", ctx("the API admitted from no pod")),
        Some(names) => {
            assert_eq!(api.len(), 1, "{}", ctx("one API rule"));
            let f = api[0]["from"].as_array().unwrap();
            assert_eq!(f.len(), 1, "{}", ctx("API from namespaces"));
            let e = &f[0]["namespaceSelector"]["matchExpressions"][0];
            assert_eq!(e["key"], "kubernetes.io/metadata.name");
            assert_eq!(e["operator"], "In");
            assert_eq!(
                e["values"],
                serde_json::json!(names),
                "{}",
                ctx("API namespaces")
            );
            assert!(f[0]["podSelector"].is_null());
        }
    }
    let probe = rule_for("TCP", probe_port);
    assert_eq!(probe.len(), 1, "{}", ctx("one probe rule"));
    assert!(
        probe[0]["from"].is_null(),
        "{}",
        ctx("probes from anywhere")
    );
}

#[test]
fn chart_lints_renders_and_validates_against_the_kubernetes_schemas() {
    let (Some(helm), Some(kubeconform), Some(schemas)) =
        (tool("helm"), tool("kubeconform"), schemas())
    else {
        return;
    };
    let dir = Dir::new("chart");
    let mut files = Vec::new();
    let mut total = 0;
    for (name, args) in VARIANTS {
        ok(Command::new(&helm)
            .args(["lint", "--strict"])
            .arg(chart())
            .arg(PEERS)
            .args(*args));
        let out = helm_template(&helm, args);
        assert!(
            out.status.success(),
            "helm template ({name}): {}",
            text(&out.stderr)
        );
        let rendered = text(&out.stdout);
        let docs = yaml_docs(&rendered);
        check_objects(name, &docs);
        total += docs.len();
        let f = dir.0.join(format!("{name}.yaml"));
        std::fs::write(&f, rendered).unwrap();
        files.push(f);
    }
    for v in KUBERNETES {
        let out = ok(Command::new(&kubeconform)
            .args(["-strict", "-summary", "-kubernetes-version", v])
            .args(schema_locations(&schemas))
            .args(&files));
        println!("kubeconform, Kubernetes {v}: {}", out.trim());
        assert!(
            out.contains(&format!(
                "{total} resources found in {} files - Valid: {total}, Invalid: 0, Errors: 0, Skipped: 0",
                files.len()
            )),
            "kubeconform, Kubernetes {v}: {out}"
        );
    }
}

/// kubeconform's `-schema-location` arguments for the local schemas: the Kubernetes kinds
/// of each version, and the CRDs by group.
fn schema_locations(schemas: &Path) -> [String; 4] {
    let s = schemas.display();
    [
        "-schema-location".into(),
        format!(
            "{s}/{{{{ .NormalizedKubernetesVersion }}}}-standalone{{{{ .StrictSuffix }}}}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json"
        ),
        "-schema-location".into(),
        format!(
            "{s}/crds/{{{{ .Group }}}}/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json"
        ),
    ]
}

/// kubeconform itself: a misspelt key fails, in a Kubernetes kind and in a CRD's (so that the
/// test above cannot pass on schemas that accept anything).
#[test]
fn kubeconform_refuses_a_misspelt_key() {
    let (Some(kubeconform), Some(schemas)) = (tool("kubeconform"), schemas()) else {
        return;
    };
    for bad in [
        "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  ports: [{port: 8805, protocl: UDP}]\n",
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: x}\nspec: {confg: '{}'}\n",
        "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec:\n  selector: {}\n  endpoints: [{port: api, intervall: 5s}]\n",
    ] {
        let mut child = Command::new(&kubeconform)
            .args(["-strict", "-kubernetes-version", KUBERNETES[0]])
            .args(schema_locations(&schemas))
            .arg("-")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(bad.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let said = text(&out.stdout) + &text(&out.stderr);
        assert!(!out.status.success(), "kubeconform accepted:\n{bad}");
        assert!(
            said.contains("additional properties") && said.contains("not allowed"),
            "kubeconform on\n{bad}said: {said}"
        );
    }
}

/// The upfd.yaml the chart writes is one upfd accepts: rendered with loopback addresses
/// and `lo` as the interfaces (what check-config looks for on this host) and a state
/// directory here.
#[test]
fn rendered_configuration_passes_upfd_check_config() {
    let Some(helm) = tool("helm") else {
        return;
    };
    let dir = Dir::new("config");
    let state = dir.0.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let state_set = format!("--set=config.state.directory={}", state.display());
    let out = helm_template(
        &helm,
        &[
            "--set=networks.n3.address=127.0.0.7/8",
            "--set=networks.n4.address=127.0.0.7/8",
            "--set=networks.n3.interface=lo",
            "--set=networks.n6.interface=lo",
            &state_set,
        ],
    );
    assert!(out.status.success(), "helm template: {}", text(&out.stderr));
    let docs = yaml_docs(&text(&out.stdout));
    let cm = find(&docs, "ConfigMap", "").unwrap();
    // The token the pod reads from the Secret's mount, here a file of the test's.
    let token = dir.0.join("token");
    std::fs::write(&token, "a-token-of-the-test\n").unwrap();
    let yaml = cm["data"]["upfd.yaml"].as_str().unwrap();
    assert!(yaml.contains("token_file: /etc/upfd/api/token"), "{yaml}");
    let yaml = yaml.replace("/etc/upfd/api/token", &token.display().to_string());
    let f = dir.0.join("upfd.yaml");
    std::fs::write(&f, &yaml).unwrap();
    let out = run(Command::new(UPFD).arg("check-config").arg(&f));
    assert!(
        out.status.success(),
        "upfd check-config refused the chart's upfd.yaml:\n{yaml}\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Values that cannot work stop `helm template` with the key to fix.
#[test]
fn chart_refuses_values_that_cannot_work() {
    let Some(helm) = tool("helm") else {
        return;
    };
    for (args, says) in [
        (&["--set=networks.n3.cni=bridge"][..], "networks.n3.cni"),
        (&["--set=config.api=null"][..], "config.api.listen"),
        (
            &["--set=networks.n6.cni=host-device"][..],
            "networks.n6.device",
        ),
        (&["--set=networks.n4.enabled=false"][..], "config.node_id"),
        (
            &[
                "--set=networks.n4.enabled=false",
                "--set=config.node_id=upf1",
            ][..],
            "config.n4.address",
        ),
        // N4 open to whoever reaches it is not rendered.
        (
            &["--set=config.n4.allowed_peers=null"][..],
            "config.n4.allowed_peers",
        ),
        (
            &["--set=config.n4.allowed_peers={}"][..],
            "config.n4.allowed_peers",
        ),
        // The kubelet cannot send a token: the probes need the plain listener.
        (
            &["--set=config.api.probe_address=null"][..],
            "config.api.probe_address",
        ),
        (
            &["--set=config.api.token_file=/tmp/token"][..],
            "config.api.token_file",
        ),
    ] {
        let out = helm_template(&helm, args);
        assert!(!out.status.success(), "helm template {args:?} succeeded");
        assert!(
            text(&out.stderr).contains(says),
            "helm template {args:?} said {} (expected {says})",
            text(&out.stderr)
        );
    }
}

/// Without SMF peers the chart does not render at all, with the defaults as with anything
/// else, and says which value to set. (`helm lint` reports a template's `fail` as
/// information only, by design: it is `helm template` and `helm install` that stop.)
#[test]
fn chart_refuses_to_render_without_smf_peers() {
    let Some(helm) = tool("helm") else {
        return;
    };
    for args in [&[][..], &["--set=networkPolicy.enabled=false"][..]] {
        let out = helm_template_of(&helm, &chart(), args);
        assert!(!out.status.success(), "helm template {args:?} succeeded");
        let said = text(&out.stderr);
        assert!(
            said.contains("config.n4.allowed_peers: name the SMFs admitted to N4"),
            "helm template {args:?} said {said}"
        );
    }
}

/// The install notes (NOTES.txt) say which SMFs N4 admits, upfd's and the NetworkPolicy's,
/// and which namespaces reach the API. Helm renders them only on install (which needs a
/// cluster): here as a template of a copy of the chart.
#[test]
fn install_notes_name_the_smfs_admitted_and_the_api_namespaces() {
    let Some(helm) = tool("helm") else {
        return;
    };
    let dir = Dir::new("notes");
    let copy = dir.0.join("upfd");
    copy_dir(&chart(), &copy);
    let t = copy.join("templates");
    let notes = std::fs::read_to_string(t.join("NOTES.txt")).unwrap();
    std::fs::remove_file(t.join("NOTES.txt")).unwrap();
    std::fs::write(
        t.join("_notes.tpl"),
        format!("{{{{- define \"notes\" }}}}{notes}{{{{- end }}}}\n"),
    )
    .unwrap();
    std::fs::write(
        t.join("notes.yaml"),
        "notes: {{ include \"notes\" . | toJson }}\n",
    )
    .unwrap();
    let render = |args: &[&str]| -> String {
        let out = helm_template_of(
            &helm,
            &copy,
            &[&["--show-only", "templates/notes.yaml"], args].concat(),
        );
        assert!(out.status.success(), "helm template: {}", text(&out.stderr));
        let v: Value = serde_norway::from_str(&text(&out.stdout)).unwrap();
        v["notes"].as_str().unwrap().to_string()
    };
    let n = render(&[
        "--set=config.n4.allowed_peers={198.51.100.0/24,2001:db8:4::/64}",
        "--set=networkPolicy.api.namespaces={ops}",
    ]);
    for line in [
        "SMFs admitted (config.n4.allowed_peers): 198.51.100.0/24, 2001:db8:4::/64",
        "NetworkPolicy upf-upfd admits N4 only from: 198.51.100.0/24, 2001:db8:4::/64.",
        "Admitted from the pods of: namespace(s) ops.",
        "get secret upf-upfd-api-token -o jsonpath='{.data.token}'",
        "curl -H \"Authorization: Bearer $TOKEN\" localhost:9100/api/v1/status",
    ] {
        assert!(n.contains(line), "no {line:?} in the notes:\n{n}");
    }
    let n = render(&[PEERS, "--set=networkPolicy.enabled=false"]);
    for line in [
        "SMFs admitted (config.n4.allowed_peers): 198.51.100.0/24",
        "networkPolicy.enabled is false: on the cluster network anyone may send to N4",
    ] {
        assert!(n.contains(line), "no {line:?} in the notes:\n{n}");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// The Dockerfile's instructions, continuation lines joined, comments left out.
fn dockerfile() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || (t.is_empty() && cur.is_empty()) {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
        } else {
            cur.push_str(t);
            out.push(std::mem::take(&mut cur));
        }
    }
    out
}

/// `-p NAME` arguments of a cargo command.
fn packages(cmd: &str) -> BTreeSet<String> {
    let w: Vec<&str> = cmd.split_whitespace().collect();
    w.windows(2)
        .filter(|p| p[0] == "-p")
        .map(|p| p[1].to_string())
        .collect()
}

/// The workspace's package names.
fn workspace_packages() -> BTreeSet<String> {
    let root = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let members = root
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .unwrap();
    members
        .split('"')
        .skip(1)
        .step_by(2)
        .map(|m| {
            let toml = std::fs::read_to_string(repo().join(m).join("Cargo.toml")).unwrap();
            toml.lines()
                .find_map(|l| l.strip_prefix("name = \""))
                .and_then(|l| l.strip_suffix('"'))
                .unwrap_or_else(|| panic!("{m}/Cargo.toml: name"))
                .to_string()
        })
        .collect()
}

/// The packages of a minimal Debian (what debootstrap's minbase, and so debian:12-slim, has):
/// the Priority: required ones and apt, with everything they depend on, as this host's
/// dpkg database records them.
fn slim_packages() -> BTreeSet<String> {
    let db = ok(Command::new("dpkg-query").args([
        "-W",
        "-f=${db:Status-Status}\t${Package}\t${Priority}\t${Pre-Depends}, ${Depends}\n",
    ]));
    let mut deps: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    let mut todo = Vec::new();
    for l in db.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        if f.len() < 4 || f[0] != "installed" {
            continue;
        }
        if f[2] == "required" || f[1] == "apt" {
            todo.push(f[1].to_string());
        }
        // "a (>= 1), b:any | c" -> [[a], [b, c]]
        let alts = f[3]
            .split(',')
            .map(|d| {
                d.split('|')
                    .filter_map(|a| a.split_whitespace().next())
                    .map(|a| a.split(':').next().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .filter(|a| !a.is_empty())
            .collect();
        deps.insert(f[1].to_string(), alts);
    }
    let mut have = BTreeSet::new();
    while let Some(p) = todo.pop() {
        if !deps.contains_key(&p) || !have.insert(p.clone()) {
            continue;
        }
        for alts in &deps[&p] {
            // The alternative installed here (the first one if none is).
            let pick = alts
                .iter()
                .find(|a| deps.contains_key(*a))
                .unwrap_or(&alts[0]);
            todo.push(pick.clone());
        }
    }
    have
}

#[test]
fn dockerfile_builds_what_the_readme_builds() {
    let ins = dockerfile();
    let stages: Vec<usize> = ins
        .iter()
        .enumerate()
        .filter(|(_, i)| i.starts_with("FROM "))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(stages.len(), 2, "a build stage and a runtime stage");
    let (build, runtime) = (&ins[stages[0]..stages[1]], &ins[stages[1]..]);
    assert!(build[0].ends_with(" AS build"), "{}", build[0]);

    // The build: scripts/demo.sh's (README: "two commands"), with upfctl.
    let demo = std::fs::read_to_string(repo().join("scripts/demo.sh")).unwrap();
    let demo_build = demo
        .lines()
        .find(|l| l.trim_start().starts_with("cargo build"))
        .unwrap();
    let cargo = build
        .iter()
        .find(|i| i.starts_with("RUN cargo build"))
        .expect("RUN cargo build in the build stage");
    for flag in ["--release", "--locked"] {
        assert!(demo_build.contains(flag) && cargo.contains(flag), "{flag}");
    }
    let built = packages(cargo);
    let mut want = packages(demo_build);
    want.insert("upfctl".into());
    assert_eq!(
        built, want,
        "the Dockerfile builds scripts/demo.sh's packages and upfctl"
    );
    let members = workspace_packages();
    assert!(
        built.is_subset(&members),
        "{:?} are not workspace members ({members:?})",
        built.difference(&members).collect::<Vec<_>>()
    );
    // Every binary copied out is one built.
    for w in cargo.split_whitespace() {
        if let Some(b) = w.strip_prefix("target/release/") {
            assert!(built.contains(b), "target/release/{b} is not built");
        }
    }
    // The build stage installs what building the XDP programs needs (scripts/deps.sh).
    let apt = build
        .iter()
        .find(|i| i.contains("apt-get install"))
        .expect("apt-get install in the build stage");
    for p in [
        "make", // libbpf-sys builds its vendored libbpf with make
        "clang",
        "llvm",
        "libbpf-dev",
        "libelf-dev",
        "zlib1g-dev",
        "pkg-config",
        "m4",
        "linux-libc-dev",
    ] {
        assert!(
            apt.split_whitespace().any(|w| w == p),
            "build stage lacks {p}"
        );
    }

    // COPY sources exist and the build context has them.
    let ignore = std::fs::read_to_string(repo().join(".dockerignore")).unwrap();
    let ignored: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for i in ins
        .iter()
        .filter(|i| i.starts_with("COPY ") && !i.contains("--from="))
    {
        let w: Vec<&str> = i.split_whitespace().collect();
        for src in &w[1..w.len() - 1] {
            assert!(repo().join(src).exists(), "{i}: {src} does not exist");
            for pat in &ignored {
                let p = pat.trim_end_matches('/');
                assert!(
                    !(src.trim_end_matches('/') == p || src.starts_with(&format!("{p}/"))),
                    "{i}: {src} is excluded by .dockerignore's {pat}"
                );
            }
        }
    }
    // The image runs upfd on the example configuration it carries.
    assert!(runtime
        .iter()
        .any(|i| i == "COPY deploy/config/upfd.yaml /etc/upfd/upfd.yaml"));
    assert!(runtime.iter().any(|i| i == "ENTRYPOINT [\"upfd\"]"));
    assert!(runtime
        .iter()
        .any(|i| i == "CMD [\"--config\", \"/etc/upfd/upfd.yaml\"]"));

    // Every library upfd loads is in debian:12-slim (Debian's Priority: required packages,
    // apt, and what they depend on: slim_packages) or installed by the runtime stage.
    let runtime_apt: BTreeSet<&str> = runtime
        .iter()
        .filter(|i| i.contains("apt-get install"))
        .flat_map(|i| i.split_whitespace())
        .collect();
    if on_path("dpkg", "the library check needs Debian's dpkg").is_some() {
        let slim = slim_packages();
        let ldd = ok(Command::new("ldd").arg(UPFD));
        for lib in ldd.lines().filter_map(|l| {
            let path = l.split("=>").nth(1)?.split_whitespace().next()?;
            path.starts_with('/').then(|| path.to_string())
        }) {
            // dpkg knows each file under one name: /lib or /usr/lib (merged /usr), the
            // link's or the file's.
            let real = std::fs::canonicalize(&lib).unwrap().display().to_string();
            let mut names = vec![lib.clone(), real.clone()];
            for n in [&lib, &real] {
                if let Some(rest) = n.strip_prefix("/usr/lib/") {
                    names.push(format!("/lib/{rest}"));
                } else if let Some(rest) = n.strip_prefix("/lib/") {
                    names.push(format!("/usr/lib/{rest}"));
                }
            }
            let owner = names
                .iter()
                .map(|n| run(Command::new("dpkg").arg("-S").arg(n)))
                .find(|o| o.status.success())
                .unwrap_or_else(|| panic!("no package owns {lib} (as any of {names:?})"));
            let pkg = text(&owner.stdout)
                .split(':')
                .next()
                .unwrap()
                .trim()
                .to_string();
            assert!(
                slim.contains(&pkg) || runtime_apt.contains(pkg.as_str()),
                "upfd loads {lib} of {pkg}, which debian:12-slim lacks: the runtime stage must install {pkg}"
            );
        }
    }

    let Some(hadolint) = tool("hadolint") else {
        return;
    };
    ok(Command::new(hadolint).arg(repo().join("Dockerfile")));
}

/// `key=value` lines of a unit file.
fn unit_keys(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[test]
fn systemd_unit_verifies_and_keeps_sessions_on_stop() {
    let unit = repo().join("deploy/systemd/upfd.service");
    let text_ = std::fs::read_to_string(&unit).unwrap();
    let k = unit_keys(&text_);
    assert_eq!(
        k["ExecStart"],
        "/usr/local/bin/upfd --config /etc/upfd/upfd.yaml"
    );
    assert_eq!(
        k["ExecStartPre"],
        "/usr/local/bin/upfd check-config /etc/upfd/upfd.yaml"
    );
    assert_eq!(k["KillSignal"], "SIGTERM");
    assert_eq!(k["Restart"], "on-failure");
    assert_eq!(k["LimitMEMLOCK"], "infinity");
    let want: BTreeSet<String> = CAPABILITIES.iter().map(|c| format!("CAP_{c}")).collect();
    for key in ["AmbientCapabilities", "CapabilityBoundingSet"] {
        let got: BTreeSet<String> = k[key].split_whitespace().map(str::to_string).collect();
        assert_eq!(got, want, "{key}");
    }
    // StateDirectory=upfd is /var/lib/upfd, and the unit opts in to the state there (the
    // example configuration leaves it out, so that a plain run writes nothing).
    assert_eq!(k["StateDirectory"], "upfd");
    assert_eq!(k["Environment"], "UPFD_STATE__DIRECTORY=/var/lib/upfd");
    let example: Value = serde_norway::from_str(
        &std::fs::read_to_string(repo().join("deploy/config/upfd.yaml")).unwrap(),
    )
    .unwrap();
    assert!(example["state"].is_null(), "{:?}", example["state"]);
    // systemd waits longer than a release without state takes.
    let stop = seconds(k["TimeoutStopSec"].as_str());
    let release = example["n4"]["graceful_release_period"]
        .as_str()
        .map(seconds)
        .unwrap_or(30.0);
    assert!(
        stop > release,
        "TimeoutStopSec {stop}s <= graceful_release_period {release}s"
    );

    let Some(analyze) = on_path(
        "systemd-analyze",
        "apt-get install systemd (scripts/ops-tools.sh does when it is missing)",
    ) else {
        return;
    };
    // A scratch root with systemd's own units and an executable at upfd's path, so that
    // verify checks this unit and nothing of the host.
    let units = ["/usr/lib/systemd/system", "/lib/systemd/system"]
        .into_iter()
        .find(|d| Path::new(d).join("sysinit.target").exists())
        .expect("systemd's units");
    let root = Dir::new("systemd");
    let r = &root.0;
    std::fs::create_dir_all(r.join("usr/lib/systemd")).unwrap();
    std::fs::create_dir_all(r.join("etc/systemd/system")).unwrap();
    std::fs::create_dir_all(r.join("usr/local/bin")).unwrap();
    ok(Command::new("cp")
        .arg("-a")
        .arg(units)
        .arg(r.join("usr/lib/systemd/")));
    let stub = r.join("usr/local/bin/upfd");
    std::fs::write(&stub, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    let placed = r.join("etc/systemd/system/upfd.service");
    std::fs::copy(&unit, &placed).unwrap();
    let out = run(Command::new(analyze)
        .arg(format!("--root={}", r.display()))
        .arg("verify")
        .arg(&placed));
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify ({}): {said}",
        out.status
    );
}

#[test]
fn grafana_dashboard_queries_parse_and_use_the_datasource_variable() {
    let path = repo().join("deploy/grafana/upfd-dashboard.json");
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let vars = d["templating"]["list"].as_array().unwrap();
    assert!(
        vars.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a Prometheus data source variable named datasource"
    );
    let mut exprs = Vec::new();
    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    for p in d["panels"].as_array().unwrap() {
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "panel ids are unique"
        );
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_u64().unwrap(),
            g["y"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(x + w <= 24, "{}: wider than the grid", p["title"]);
        for cx in x..x + w {
            for cy in y..y + h {
                assert!(
                    cells.insert((cx, cy)),
                    "{} overlaps another panel",
                    p["title"]
                );
            }
        }
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{}: no query", p["title"]);
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{}", p["title"]);
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    for v in vars.iter().filter(|v| v["type"] == "query") {
        assert_eq!(v["datasource"]["uid"], "${datasource}");
    }

    // Every expression, with Grafana's variables given values, is PromQL promtool parses:
    // one recording rule each.
    let Some(promtool) = tool("promtool") else {
        return;
    };
    let mut rules = String::from("groups:\n- name: dashboard\n  rules:\n");
    for (n, e) in exprs.iter().enumerate() {
        let e = e
            .replace("$__rate_interval", "5m")
            .replace("$instance", ".*");
        rules += &format!(
            "  - record: dashboard:expr{n}\n    expr: {}\n",
            serde_json::to_string(&e).unwrap()
        );
    }
    let dir = Dir::new("grafana");
    let f = dir.0.join("rules.yaml");
    std::fs::write(&f, rules).unwrap();
    let out = ok(Command::new(promtool).args(["check", "rules"]).arg(&f));
    assert!(
        out.contains(&format!("SUCCESS: {} rules found", exprs.len())),
        "{out}"
    );
}
