//! Property tests of the admission decisions against SPEC.md:
//! - the decoder, mutate and validate never panic, whatever arrives;
//! - for valid Machines, mutation is idempotent and its output validates;
//! - the merge matches an independent model of the spec (template table, override field by
//!   field, disks by name, field defaults), also after a template change on UPDATE;
//! - an allowed update never removes or shrinks a stored disk.

use std::cmp::Ordering;

use base64::Engine;
use kubevirt_operator::admission::Admission;
use kubevirt_operator::admission::review::{self, GroupVersionKind, Request, Verdict};
use kubevirt_operator::api::Quantity;
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::machine::machine_types::MachineTypes;
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use serde_json::{Map, Value, json};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        // Failures are reported with their shrunk input; no regression files in the tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ------------------------------------------------------------------------------------------
// The spec's template table, written out here so that the model does not borrow from the code.

struct Template {
    cores: i64,
    memory: &'static str,
    root: &'static str,
}

fn template(name: &str) -> Template {
    match name {
        "small" => Template {
            cores: 1,
            memory: "2Gi",
            root: "20Gi",
        },
        "medium" => Template {
            cores: 2,
            memory: "4Gi",
            root: "40Gi",
        },
        "large" => Template {
            cores: 4,
            memory: "8Gi",
            root: "80Gi",
        },
        other => panic!("not a template: {other}"),
    }
}

const TEMPLATES: &[&str] = &["small", "medium", "large"];

// ------------------------------------------------------------------------------------------
// Requests and verdicts.

/// With i440fx allowed too (a KubeVirt whose emulatedMachines list it), so the generated
/// machine types all stay valid.
fn admission(default_template: &str) -> Admission {
    let types = MachineTypes::parse("q35*,pc-q35*,pc,pc-i440fx*").expect("patterns");
    let catalog = Catalog::with_default(default_template)
        .expect("built-in")
        .with_machine_types(types);
    Admission::new(catalog).expect("schema")
}

fn machine(spec: Value) -> Value {
    json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
           "metadata": {"name": "vm", "namespace": "default"}, "spec": spec})
}

fn request(operation: &str, object: Option<Value>, old: Option<Value>) -> Request {
    Request {
        uid: "prop".into(),
        kind: GroupVersionKind {
            group: "vitistack.io".into(),
            version: "v1alpha1".into(),
            kind: "Machine".into(),
        },
        name: "vm".into(),
        namespace: Some("default".into()),
        operation: operation.into(),
        object,
        old_object: old,
        ..Request::default()
    }
}

fn has_patch(v: &Verdict) -> bool {
    v.patch.as_ref().is_some_and(|p| !p.0.is_empty())
}

/// The object after the mutating webhook: its verdict must allow, and its patch apply.
fn mutated(a: &Admission, req: &Request) -> Result<Value, TestCaseError> {
    let verdict = a.mutate(req);
    prop_assert!(verdict.allowed, "mutate denied: {:?}", verdict.status);
    let mut object = req.object.clone().expect("object");
    if let Some(patch) = &verdict.patch {
        json_patch::patch(&mut object, patch)
            .map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}")))?;
    }
    Ok(object)
}

/// Whatever the verdict, it must be answerable on the wire: encodes, and a patch decodes back.
fn assert_encodable(verdict: &Verdict) -> Result<(), TestCaseError> {
    let bytes = review::encode(review::V1, "prop", verdict)
        .map_err(|e| TestCaseError::fail(format!("does not encode: {e}")))?;
    let answer: Value = serde_json::from_slice(&bytes).expect("encode writes JSON");
    prop_assert_eq!(&answer["response"]["allowed"], &json!(verdict.allowed));
    if !verdict.allowed {
        let message = answer["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default();
        prop_assert!(!message.is_empty(), "a denial must say why: {}", answer);
    }
    if let Some(patch) = answer["response"]["patch"].as_str() {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .expect("base64");
        serde_json::from_slice::<json_patch::Patch>(&raw).expect("a JSON Patch");
        prop_assert_eq!(&answer["response"]["patchType"], "JSONPatch");
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Valid Machines, as a user would write them.

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    proptest::option::of(s).boxed()
}

fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        map.insert(key.to_owned(), v);
    }
}

fn object(fields: Vec<(&str, Option<Value>)>) -> Value {
    let mut map = Map::new();
    for (k, v) in fields {
        put(&mut map, k, v);
    }
    Value::Object(map)
}

fn memory_size() -> impl Strategy<Value = Value> {
    prop_oneof![
        select(vec!["64Mi", "512Mi", "1Gi", "3Gi", "16Gi", "2G", "1.5Gi"]).prop_map(|s| json!(s)),
        (1u32..64).prop_map(|n| json!(format!("{n}Gi"))),
        Just(json!(1_073_741_824u64)),
    ]
}

fn disk_size() -> impl Strategy<Value = Value> {
    prop_oneof![
        (1u32..200).prop_map(|n| json!(format!("{n}Gi"))),
        select(vec!["1Ti", "500Mi", "1.5Gi", "100G"]).prop_map(|s| json!(s)),
        Just(json!(10_737_418_240u64)),
    ]
}

fn disk(name: &'static str) -> impl Strategy<Value = Value> {
    // Only the template's root disk may leave out its size.
    let size = if name == "root" {
        opt(disk_size())
    } else {
        disk_size().prop_map(Some).boxed()
    };
    (
        size,
        opt(select(vec!["fast-ssd", "ceph.rbd", "standard"])),
        opt(select(vec![
            "ReadWriteOnce",
            "ReadWriteMany",
            "ReadOnlyMany",
        ])),
        opt(select(vec!["Filesystem", "Block"])),
    )
        .prop_map(move |(size, class, access, volume)| {
            object(vec![
                ("name", Some(json!(name))),
                ("size", size),
                ("storageClass", class.map(|s| json!(s))),
                ("accessMode", access.map(|s| json!(s))),
                ("volumeMode", volume.map(|s| json!(s))),
            ])
        })
}

fn disks() -> impl Strategy<Value = Vec<Value>> {
    subsequence(vec!["root", "data", "logs", "scratch", "d-1"], 0..=4)
        .prop_shuffle()
        .prop_flat_map(|names| names.into_iter().map(disk).collect::<Vec<_>>())
}

fn networks() -> impl Strategy<Value = Vec<Value>> {
    subsequence(vec!["eth0", "eth1", "net-2"], 0..=3)
        .prop_shuffle()
        .prop_flat_map(|names| {
            names
                .into_iter()
                .enumerate()
                .map(|(i, name)| {
                    (
                        select(vec!["prod-network", "storage-network", "n1"]),
                        opt(select(vec!["virtio", "e1000", "rtl8139"])),
                        any::<bool>(),
                    )
                        .prop_map(move |(net, model, mac)| {
                            object(vec![
                                ("name", Some(json!(name))),
                                ("networkName", Some(json!(net))),
                                ("model", model.map(|m| json!(m))),
                                // Unique unicast MACs: the index is the last octet.
                                (
                                    "macAddress",
                                    mac.then(|| json!(format!("52:54:00:00:00:{i:02x}"))),
                                ),
                            ])
                        })
                })
                .collect::<Vec<_>>()
        })
}

fn cloud_init() -> impl Strategy<Value = Value> {
    let secret_ref = (
        select(vec!["machine-secrets", "s", "cloud.init"]),
        opt(select(vec!["userdata", "user-data.yaml", "KEY_1"])),
    )
        .prop_map(|(name, key)| {
            object(vec![
                ("name", Some(json!(name))),
                ("key", key.map(|k| json!(k))),
            ])
        });
    (
        opt("#cloud-config\n[a-z: \n]{0,20}".prop_map(|s| json!(s))),
        opt("version: 2\n".prop_map(|s: String| json!(s))),
        opt(secret_ref),
    )
        .prop_map(|(user, net, secret)| {
            object(vec![
                ("userData", user),
                ("networkData", net),
                ("secretRef", secret),
            ])
        })
}

fn domain() -> impl Strategy<Value = Value> {
    let machine = opt(select(vec![
        "pc-q35",
        "pc-i440fx",
        "pc-q35-rhel9.2.0",
        "pc-i440fx-2.12",
    ]))
    .prop_map(|t| object(vec![("type", t.map(|t| json!(t)))]));
    let features =
        (opt(any::<bool>()), opt(any::<bool>()), opt(any::<bool>())).prop_map(|(a, b, c)| {
            object(vec![
                ("acpi", a.map(Value::Bool)),
                ("apic", b.map(Value::Bool)),
                ("hyperv", c.map(Value::Bool)),
            ])
        });
    let firmware = (opt(any::<bool>()), opt(any::<bool>())).prop_map(|(efi, secure)| {
        // secureBoot requires efi.
        let efi = if secure == Some(true) { Some(true) } else { efi };
        json!({"bootloader": object(vec![("efi", efi.map(Value::Bool)), ("secureBoot", secure.map(Value::Bool))])})
    });
    (opt(machine), opt(features), opt(firmware)).prop_map(|(m, f, fw)| {
        // secureBoot requires q35 (KubeVirt refuses it with i440fx).
        let secure = fw
            .as_ref()
            .and_then(|fw| fw.pointer("/bootloader/secureBoot"))
            == Some(&Value::Bool(true));
        let i440fx = |m: &Value| {
            m["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("pc-i440fx"))
        };
        let m = match m {
            Some(m) if secure && i440fx(&m) => Some(json!({"type": "pc-q35"})),
            other => other,
        };
        object(vec![("machine", m), ("features", f), ("firmware", fw)])
    })
}

fn valid_spec() -> impl Strategy<Value = Value> {
    let cpu = (opt(1i64..=256), opt(1i64..=8), opt(1i64..=16)).prop_map(|(c, t, s)| {
        object(vec![
            ("cores", c.map(Value::from)),
            ("threads", t.map(Value::from)),
            ("sockets", s.map(Value::from)),
        ])
    });
    let memory = opt(memory_size()).prop_map(|size| object(vec![("size", size)]));
    let resources = (opt(cpu), opt(memory))
        .prop_map(|(cpu, memory)| object(vec![("cpu", cpu), ("memory", memory)]));
    (
        opt(select(TEMPLATES.to_vec())),
        opt(resources),
        disks(),
        networks(),
        subsequence(vec!["disk", "network", "cdrom"], 0..=3).prop_shuffle(),
        opt(cloud_init()),
        opt(domain()),
        opt(any::<bool>()),
    )
        .prop_map(|(tpl, res, disks, nets, boot, ci, dom, running)| {
            let list = |v: Vec<Value>| (!v.is_empty()).then_some(Value::Array(v));
            object(vec![
                ("template", tpl.map(|t| json!(t))),
                ("resources", res),
                ("disks", list(disks)),
                ("networks", list(nets)),
                (
                    "bootOrder",
                    list(boot.into_iter().map(|b| json!(b)).collect()),
                ),
                ("cloudInit", ci),
                ("domain", dom),
                ("running", running.map(Value::Bool)),
            ])
        })
}

// ------------------------------------------------------------------------------------------
// The model: SPEC.md's resolution of a user's spec, computed independently of the code.

/// A quantity as the resolved spec stores it: the string the user wrote, integers as digits.
fn quantity_string(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.to_string()),
        other => other.clone(),
    }
}

fn with_disk_defaults(d: &Value) -> Value {
    let mut d = d.clone();
    if let Some(size) = d.get("size").map(quantity_string) {
        d["size"] = size;
    }
    // Modes the user left unset stay unset: the reconciler takes them from the StorageProfile.
    d
}

fn model(user: &Value, default_template: &str) -> Value {
    let name = user["template"].as_str().unwrap_or(default_template);
    let t = template(name);
    let user_cpu = &user["resources"]["cpu"];
    let pick = |field: &str, from_template: i64| {
        user_cpu.get(field).cloned().unwrap_or(json!(from_template))
    };
    let memory = user["resources"]["memory"]
        .get("size")
        .map(quantity_string)
        .unwrap_or(json!(t.memory));

    let user_disks = user["disks"].as_array().cloned().unwrap_or_default();
    let mut root = user_disks
        .iter()
        .find(|d| d["name"] == "root")
        .cloned()
        .unwrap_or(json!({"name": "root"}));
    if root.get("size").is_none() {
        root["size"] = json!(t.root);
    }
    let mut disks = vec![with_disk_defaults(&root)];
    disks.extend(
        user_disks
            .iter()
            .filter(|d| d["name"] != "root")
            .map(with_disk_defaults),
    );

    let mut spec = json!({
        "template": name,
        "resources": {
            "cpu": {"cores": pick("cores", t.cores), "threads": pick("threads", 1), "sockets": pick("sockets", 1)},
            "memory": {"size": memory},
        },
        "disks": disks,
        "running": user.get("running").cloned().unwrap_or(json!(true)),
    });
    if let Some(nets) = user["networks"].as_array() {
        let nets: Vec<Value> = nets
            .iter()
            .map(|n| {
                let mut n = n.clone();
                if n.get("model").is_none() {
                    n["model"] = json!("virtio");
                }
                n
            })
            .collect();
        spec["networks"] = json!(nets);
    }
    if let Some(boot) = user.get("bootOrder") {
        spec["bootOrder"] = boot.clone();
    }
    if let Some(ci) = user.get("cloudInit") {
        let mut ci = ci.clone();
        if ci.get("secretRef").is_some() && ci["secretRef"].get("key").is_none() {
            ci["secretRef"]["key"] = json!("userdata");
        }
        spec["cloudInit"] = ci;
    }
    let mut domain = user.get("domain").cloned().unwrap_or(json!({}));
    if domain.get("machine").is_none() {
        domain["machine"] = json!({});
    }
    if domain["machine"].get("type").is_none() {
        domain["machine"]["type"] = json!("pc-q35");
    }
    spec["domain"] = domain;
    spec
}

// ------------------------------------------------------------------------------------------
// Anything at all, and Machines with wrong types in random places.

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        select(vec![
            "small",
            "huge",
            "64Mi",
            "0",
            "-1Gi",
            "1e400",
            "ReadWriteAll",
            "cdrom",
            "pc-q35-",
            "01:00:5e:00:00:01",
            "..",
            "",
        ])
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(3, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                select(vec![
                    "name", "size", "template", "cores", "spec", "x", "type", "key"
                ])
                .prop_map(str::to_owned),
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every JSON pointer inside `v`, the root included.
fn pointers(v: &Value, here: String, out: &mut Vec<String>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, c)| pointers(c, format!("{here}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| pointers(c, format!("{here}/{i}"), out)),
        _ => {}
    }
}

/// A valid spec with one to three places replaced by anything.
fn corrupted_spec() -> impl Strategy<Value = Value> {
    (
        valid_spec(),
        prop::collection::vec((any::<prop::sample::Index>(), arb_json()), 1..=3),
    )
        .prop_map(|(mut spec, edits)| {
            for (at, replacement) in edits {
                let mut all = Vec::new();
                pointers(&spec, String::new(), &mut all);
                let pointer = at.get(&all).clone();
                if pointer.is_empty() {
                    spec = replacement;
                } else if let Some(slot) = spec.pointer_mut(&pointer) {
                    *slot = replacement;
                }
            }
            spec
        })
}

fn any_machine() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => corrupted_spec().prop_map(machine),
        1 => arb_json().prop_map(machine),
        1 => arb_json(),
    ]
}

// ------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// (a) Arbitrary bytes: decode returns, never panics; a success is a usable review.
    #[test]
    fn decode_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(r) = review::decode(&bytes) {
            prop_assert!(!r.request.uid.is_empty());
        }
    }

    /// (a) Arbitrary JSON, bare and inside an AdmissionReview envelope.
    #[test]
    fn decode_never_panics_on_json(
        body in arb_json(),
        request in arb_json(),
        version in select(vec![review::V1, review::V1BETA1, "admission.k8s.io/v2", ""]),
    ) {
        let _ = review::decode(&serde_json::to_vec(&body).unwrap());
        let envelope = json!({"apiVersion": version, "kind": "AdmissionReview", "request": request});
        if let Ok(r) = review::decode(&serde_json::to_vec(&envelope).unwrap()) {
            prop_assert!(version == review::V1 || version == review::V1BETA1);
            prop_assert_eq!(r.api_version, version);
            prop_assert!(!r.request.uid.is_empty());
        }
    }

    /// (b) mutate and validate on anything shaped like a Machine, any operation: no panic, an
    /// answerable verdict, a patch that applies, and on CREATE both webhooks agree.
    #[test]
    fn mutate_and_validate_never_panic(
        object in any_machine(),
        old in proptest::option::of(any_machine()),
        operation in select(vec!["CREATE", "UPDATE", "DELETE", "CONNECT", ""]),
        sub_resource in select(vec![None, Some("status"), Some("")]),
    ) {
        let a = admission("medium");
        let mut req = request(operation, Some(object.clone()), old);
        req.sub_resource = sub_resource.map(str::to_owned);
        let m = a.mutate(&req);
        assert_encodable(&m)?;
        if let (true, Some(patch)) = (m.allowed, &m.patch) {
            let mut o = object.clone();
            prop_assert!(json_patch::patch(&mut o, patch).is_ok(), "patch does not apply");
        }
        let v = a.validate(&req);
        assert_encodable(&v)?;
        prop_assert!(v.patch.is_none(), "validate never patches");
        if operation == "CREATE" && sub_resource.is_none() {
            prop_assert_eq!(m.allowed, v.allowed);
            prop_assert_eq!(
                m.status.and_then(|s| s.message),
                v.status.and_then(|s| s.message)
            );
        }
    }

    /// (c) + (d) Valid Machines: mutation matches the model of the spec, is idempotent on CREATE
    /// and on UPDATE, and its output validates.
    #[test]
    fn valid_machines_resolve_as_the_spec_says(
        spec in valid_spec(),
        default_template in select(TEMPLATES.to_vec()),
    ) {
        let a = admission(default_template);
        let once = mutated(&a, &request("CREATE", Some(machine(spec.clone())), None))?;
        prop_assert_eq!(&once["spec"], &model(&spec, default_template));
        prop_assert_eq!(&once["metadata"]["name"], "vm", "only spec and annotations change");

        let again = a.mutate(&request("CREATE", Some(once.clone()), None));
        prop_assert!(again.allowed && !has_patch(&again), "not idempotent: {:?}", again.patch);
        let on_update = a.mutate(&request("UPDATE", Some(once.clone()), Some(once.clone())));
        prop_assert!(on_update.allowed && !has_patch(&on_update), "not idempotent on UPDATE");

        let validated = a.validate(&request("CREATE", Some(once.clone()), None));
        prop_assert!(validated.allowed, "mutated Machine does not validate: {:?}", validated.status);
        let raw = a.validate(&request("CREATE", Some(machine(spec.clone())), None));
        prop_assert!(raw.allowed, "valid Machine denied: {:?}", raw.status);
    }

    /// (d) Changing the template on UPDATE re-derives every value the old template supplied and
    /// keeps what the user set; the root disk may then grow but not shrink.
    #[test]
    fn template_change_rederives_and_keeps_overrides(
        spec in valid_spec(),
        new_template in select(TEMPLATES.to_vec()),
    ) {
        let a = admission("medium");
        let stored = mutated(&a, &request("CREATE", Some(machine(spec.clone())), None))?;
        let mut edited = stored.clone();
        edited["spec"]["template"] = json!(new_template);
        let updated = mutated(&a, &request("UPDATE", Some(edited), Some(stored.clone())))?;
        let mut user = spec.clone();
        user["template"] = json!(new_template);
        let expected = model(&user, "medium");
        prop_assert_eq!(&updated["spec"], &expected);

        let verdict = a.validate(&request("UPDATE", Some(updated.clone()), Some(stored.clone())));
        let size = |m: &Value| Quantity::new(m["spec"]["disks"][0]["size"].as_str().unwrap());
        let grows_or_keeps = size(&stored).compare(&size(&updated)) != Some(Ordering::Greater);
        prop_assert_eq!(verdict.allowed, grows_or_keeps, "{:?}", verdict.status);
    }
}

/// A change to a stored Machine, as a user might make it.
#[derive(Clone, Debug)]
enum Edit {
    ToggleRunning,
    Template(&'static str),
    ResizeDisk(prop::sample::Index, Value),
    RemoveDisk(prop::sample::Index),
    AddDisk,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        Just(Edit::ToggleRunning),
        select(TEMPLATES.to_vec()).prop_map(Edit::Template),
        (any::<prop::sample::Index>(), disk_size()).prop_map(|(i, s)| Edit::ResizeDisk(i, s)),
        any::<prop::sample::Index>().prop_map(Edit::RemoveDisk),
        Just(Edit::AddDisk),
    ]
}

fn apply(edit: &Edit, object: &mut Value) {
    let spec = &mut object["spec"];
    match edit {
        Edit::ToggleRunning => spec["running"] = json!(!spec["running"].as_bool().unwrap_or(true)),
        Edit::Template(t) => spec["template"] = json!(t),
        Edit::ResizeDisk(i, size) => {
            let disks = spec["disks"].as_array_mut().expect("resolved disks");
            let n = i.index(disks.len());
            disks[n]["size"] = size.clone();
        }
        Edit::RemoveDisk(i) => {
            let disks = spec["disks"].as_array_mut().expect("resolved disks");
            let n = i.index(disks.len());
            disks.remove(n);
        }
        Edit::AddDisk => spec["disks"]
            .as_array_mut()
            .expect("resolved disks")
            .push(json!({"name": "added", "size": "1Gi"})),
    }
}

fn size_of(disk: &Value) -> Quantity {
    Quantity::new(quantity_string(&disk["size"]).as_str().expect("a size"))
}

proptest! {
    #![proptest_config(config())]

    /// Data safety (SPEC.md "Update rules"): whatever the edit, and even when the operator's
    /// default template was changed between creation and update (it is configurable), an update
    /// that the webhooks let through keeps every stored disk at its size or larger.
    #[test]
    fn allowed_updates_never_remove_or_shrink_a_stored_disk(
        spec in valid_spec(),
        created_with in select(TEMPLATES.to_vec()),
        updated_with in select(TEMPLATES.to_vec()),
        edit in edit(),
    ) {
        let stored = mutated(&admission(created_with), &request("CREATE", Some(machine(spec)), None))?;
        let a = admission(updated_with);
        let mut edited = stored.clone();
        apply(&edit, &mut edited);
        let m = a.mutate(&request("UPDATE", Some(edited.clone()), Some(stored.clone())));
        if !m.allowed {
            return Ok(());
        }
        let mut new = edited;
        if let Some(patch) = &m.patch {
            json_patch::patch(&mut new, patch).expect("patch applies");
        }
        if !a.validate(&request("UPDATE", Some(new.clone()), Some(stored.clone()))).allowed {
            return Ok(());
        }
        for old_disk in stored["spec"]["disks"].as_array().expect("disks") {
            let new_disk = new["spec"]["disks"]
                .as_array()
                .and_then(|ds| ds.iter().find(|d| d["name"] == old_disk["name"]));
            let Some(new_disk) = new_disk else {
                return Err(TestCaseError::fail(format!("disk {} was removed", old_disk["name"])));
            };
            prop_assert_ne!(
                size_of(old_disk).compare(&size_of(new_disk)),
                Some(Ordering::Greater),
                "disk {} shrank from {} to {} (created with default {}, updated with default {})",
                old_disk["name"], old_disk["size"], new_disk["size"], created_with, updated_with
            );
        }
    }
}
