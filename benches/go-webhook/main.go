// go-webhook: the plain Go comparison server for scripts/bench-webhook-vs-go.sh.
//
// What a Go developer would plainly write for this webhook's mutate path with the standard
// library only: net/http over crypto/tls (HTTP/1.1 keep-alive, the same certificate as the Rust
// server), encoding/json into typed structs, the Machine defaults of src/machine/resolve.rs (the
// template's values under the user's, disks merged by name, field defaults, the record of what
// the template filled in as the vitistack.io/template-defaults annotation and the class's values
// as vitistack.io/machine-class, the finalizer on
// CREATE), a few plain checks, and an AdmissionReview answer with a base64 JSON Patch. It does
// less than the Rust webhook (no schema check, no limits on the body's shape, no lanes, no
// metrics), so beating it is a floor, not a ceiling. Not part of the operator.
//
// Usage: go-webhook -cert cert.pem -key key.pem -listen 127.0.0.1:18444
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"reflect"
	"regexp"
	"time"
)

const (
	defaultsAnnotation = "vitistack.io/template-defaults"
	classAnnotation    = "vitistack.io/machine-class"
	finalizer          = "machine.vitistack.io/cleanup"
	defaultTemplate    = "medium"
	maxBody            = 3 << 20
)

type template struct {
	cores, threads, sockets int64
	memory, rootSize        string
}

var templates = map[string]template{
	"small":  {1, 1, 1, "2Gi", "20Gi"},
	"medium": {2, 1, 1, "4Gi", "40Gi"},
	"large":  {4, 1, 1, "8Gi", "80Gi"},
}

// classRecords: each template's values as the operator records the class a Machine was sized
// from (src/machine/classes/class.rs), serialised once, as the operator does per snapshot.
var classRecords = func() map[string]string {
	type cpu struct {
		Cores   int64 `json:"cores"`
		Threads int64 `json:"threads"`
		Sockets int64 `json:"sockets"`
	}
	type disk struct {
		Name string `json:"name"`
		Size string `json:"size"`
	}
	type record struct {
		Name   string            `json:"name"`
		CPU    cpu               `json:"cpu"`
		Memory map[string]string `json:"memory"`
		Disks  []disk            `json:"disks"`
	}
	out := map[string]string{}
	for name, t := range templates {
		b, _ := json.Marshal(record{name, cpu{t.cores, t.threads, t.sockets},
			map[string]string{"size": t.memory}, []disk{{"root", t.rootSize}}})
		out[name] = string(b)
	}
	return out
}()

// The Machine's spec, field order and omissions as the operator's own types (src/api/machine.rs).
type MachineSpec struct {
	Template  *string           `json:"template,omitempty"`
	Resources *Resources        `json:"resources,omitempty"`
	Disks     []Disk            `json:"disks,omitempty"`
	Networks  []Network         `json:"networks,omitempty"`
	Cdroms    []json.RawMessage `json:"cdroms,omitempty"`
	BootOrder []string          `json:"bootOrder,omitempty"`
	CloudInit *CloudInit        `json:"cloudInit,omitempty"`
	Domain    *Domain           `json:"domain,omitempty"`
	Running   *bool             `json:"running,omitempty"`
}

type Resources struct {
	CPU    *CPU    `json:"cpu,omitempty"`
	Memory *Memory `json:"memory,omitempty"`
}

type CPU struct {
	Cores   *int64 `json:"cores,omitempty"`
	Threads *int64 `json:"threads,omitempty"`
	Sockets *int64 `json:"sockets,omitempty"`
}

type Memory struct {
	Size *string `json:"size,omitempty"`
}

type Disk struct {
	Name         string          `json:"name"`
	Size         *string         `json:"size,omitempty"`
	StorageClass *string         `json:"storageClass,omitempty"`
	AccessMode   *string         `json:"accessMode,omitempty"`
	VolumeMode   *string         `json:"volumeMode,omitempty"`
	Source       json.RawMessage `json:"source,omitempty"`
}

type Network struct {
	Name        string  `json:"name"`
	NetworkName string  `json:"networkName"`
	Model       *string `json:"model,omitempty"`
	MacAddress  *string `json:"macAddress,omitempty"`
}

type CloudInit struct {
	UserData    *string `json:"userData,omitempty"`
	NetworkData *string `json:"networkData,omitempty"`
	SecretRef   *struct {
		Name string  `json:"name"`
		Key  *string `json:"key,omitempty"`
	} `json:"secretRef,omitempty"`
}

type Domain struct {
	Machine  *MachineType    `json:"machine,omitempty"`
	Features json.RawMessage `json:"features,omitempty"`
	Firmware json.RawMessage `json:"firmware,omitempty"`
}

type MachineType struct {
	Type *string `json:"type,omitempty"`
}

type Machine struct {
	Metadata struct {
		Name              string            `json:"name"`
		Annotations       map[string]string `json:"annotations"`
		Finalizers        []string          `json:"finalizers"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec MachineSpec `json:"spec"`
}

type AdmissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *AdmissionRequest  `json:"request,omitempty"`
	Response   *AdmissionResponse `json:"response,omitempty"`
}

type AdmissionRequest struct {
	UID       string          `json:"uid"`
	Operation string          `json:"operation"`
	Object    json.RawMessage `json:"object"`
	OldObject json.RawMessage `json:"oldObject"`
}

type Status struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type AdmissionResponse struct {
	UID       string  `json:"uid"`
	Allowed   bool    `json:"allowed"`
	Status    *Status `json:"status,omitempty"`
	Patch     []byte  `json:"patch,omitempty"` // encoding/json writes []byte as base64
	PatchType *string `json:"patchType,omitempty"`
}

type patchOp struct {
	Op    string      `json:"op"`
	Path  string      `json:"path"`
	Value interface{} `json:"value"`
}

func str(s string) *string { return &s }
func i64(n int64) *int64   { return &n }

// pick returns the user's value, or the template's, noting the latter in the record.
func pick(user *int64, fromTemplate int64, record **int64) *int64 {
	if user != nil {
		return user
	}
	*record = i64(fromTemplate)
	return i64(fromTemplate)
}

func orDefault(v *string, d string) *string {
	if v != nil {
		return v
	}
	return str(d)
}

// resolve applies the template and the field defaults; the second result is what the template
// filled in (the annotation's content).
func resolve(spec MachineSpec) (MachineSpec, MachineSpec) {
	var record MachineSpec
	name := defaultTemplate
	if spec.Template != nil {
		name = *spec.Template
	}
	out := MachineSpec{Template: str(name), Networks: spec.Networks, Cdroms: spec.Cdroms,
		BootOrder: spec.BootOrder, CloudInit: spec.CloudInit, Domain: spec.Domain, Running: spec.Running}
	t, known := templates[name]
	if known {
		var cpu CPU
		var size *string
		if spec.Resources != nil && spec.Resources.CPU != nil {
			cpu = *spec.Resources.CPU
		}
		if spec.Resources != nil && spec.Resources.Memory != nil {
			size = spec.Resources.Memory.Size
		}
		var rec CPU
		resolved := CPU{pick(cpu.Cores, t.cores, &rec.Cores), pick(cpu.Threads, t.threads, &rec.Threads),
			pick(cpu.Sockets, t.sockets, &rec.Sockets)}
		if size == nil {
			size = str(t.memory)
			record.Resources = &Resources{Memory: &Memory{Size: size}}
		}
		if rec != (CPU{}) {
			if record.Resources == nil {
				record.Resources = &Resources{}
			}
			record.Resources.CPU = &rec
		}
		out.Resources = &Resources{CPU: &resolved, Memory: &Memory{Size: size}}
		// The template's root disk first, overlaid with the user's disk of that name.
		var user *Disk
		for i := range spec.Disks {
			if spec.Disks[i].Name == "root" {
				user = &spec.Disks[i]
			}
		}
		root := Disk{Name: "root"}
		recorded := Disk{Name: "root"}
		if user != nil {
			root = *user
		}
		if root.Size == nil && (user == nil || len(user.Source) == 0) {
			root.Size, recorded.Size = str(t.rootSize), str(t.rootSize)
		}
		if user == nil {
			recorded = root
		}
		if recorded.Size != nil || user == nil {
			record.Disks = append(record.Disks, recorded)
		}
		out.Disks = append(out.Disks, root)
	} else {
		out.Resources = spec.Resources
	}
	for _, d := range spec.Disks {
		if !known || d.Name != "root" {
			// Access and volume modes stay unset: the reconciler takes them from the
			// StorageClass's CDI StorageProfile.
			out.Disks = append(out.Disks, d)
		}
	}
	out.Networks = make([]Network, len(spec.Networks))
	for i, n := range spec.Networks {
		n.Model = orDefault(n.Model, "virtio")
		out.Networks[i] = n
	}
	if c := spec.CloudInit; c != nil && c.SecretRef != nil {
		ci := *c
		ref := *c.SecretRef
		ref.Key = orDefault(ref.Key, "userdata")
		ci.SecretRef = &ref
		out.CloudInit = &ci
	}
	domain := Domain{}
	if spec.Domain != nil {
		domain = *spec.Domain
	}
	if domain.Machine == nil || domain.Machine.Type == nil {
		domain.Machine = &MachineType{str("pc-q35")}
	}
	out.Domain = &domain
	out.Running = &[]bool{spec.Running == nil || *spec.Running}[0]
	return out, record
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// validate: the plain checks a Go webhook would make on the resolved spec.
func validate(s MachineSpec) []string {
	var errs []string
	if _, ok := templates[*s.Template]; !ok {
		errs = append(errs, fmt.Sprintf("spec.template: unknown template %q", *s.Template))
	}
	outside := func(v *int64, min, max int64) bool { return v != nil && (*v < min || *v > max) }
	if r := s.Resources; r != nil && r.CPU != nil && (outside(r.CPU.Cores, 1, 256) ||
		outside(r.CPU.Threads, 1, 8) || outside(r.CPU.Sockets, 1, 16)) {
		errs = append(errs, "spec.resources.cpu: out of range")
	}
	seen := map[string]bool{}
	for i, d := range s.Disks {
		if !dnsLabel.MatchString(d.Name) || seen[d.Name] {
			errs = append(errs, fmt.Sprintf("spec.disks[%d].name: invalid or repeated", i))
		}
		seen[d.Name] = true
	}
	seen = map[string]bool{}
	for i, n := range s.Networks {
		if !dnsLabel.MatchString(n.Name) || seen[n.Name] || n.NetworkName == "" {
			errs = append(errs, fmt.Sprintf("spec.networks[%d]: invalid or repeated", i))
		}
		seen[n.Name] = true
	}
	return errs
}

func mutate(req *AdmissionRequest) *AdmissionResponse {
	resp := &AdmissionResponse{UID: req.UID, Allowed: true}
	var m Machine
	if err := json.Unmarshal(req.Object, &m); err != nil {
		return &AdmissionResponse{UID: req.UID, Status: &Status{400, err.Error()}}
	}
	spec, record := resolve(m.Spec)
	if errs := validate(spec); len(errs) > 0 {
		return &AdmissionResponse{UID: req.UID, Status: &Status{422, fmt.Sprint(errs)}}
	}
	recordJSON, _ := json.Marshal(record)
	var patch []patchOp
	if !reflect.DeepEqual(spec, m.Spec) {
		patch = append(patch, patchOp{"add", "/spec", spec})
	}
	class := classRecords[*spec.Template]
	if m.Metadata.Annotations == nil {
		patch = append(patch, patchOp{"add", "/metadata/annotations",
			map[string]string{defaultsAnnotation: string(recordJSON), classAnnotation: class}})
	} else {
		if m.Metadata.Annotations[defaultsAnnotation] != string(recordJSON) {
			patch = append(patch, patchOp{"add", "/metadata/annotations/vitistack.io~1template-defaults",
				string(recordJSON)})
		}
		if m.Metadata.Annotations[classAnnotation] != class {
			patch = append(patch, patchOp{"add", "/metadata/annotations/vitistack.io~1machine-class", class})
		}
	}
	if req.Operation == "CREATE" && m.Metadata.DeletionTimestamp == nil {
		has := false
		for _, f := range m.Metadata.Finalizers {
			has = has || f == finalizer
		}
		if m.Metadata.Finalizers == nil {
			patch = append(patch, patchOp{"add", "/metadata/finalizers", []string{finalizer}})
		} else if !has {
			patch = append(patch, patchOp{"add", "/metadata/finalizers/-", finalizer})
		}
	}
	if len(patch) > 0 {
		resp.Patch, _ = json.Marshal(patch)
		resp.PatchType = str("JSONPatch")
	}
	return resp
}

func serveMutate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var review AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil || review.Request.UID == "" {
		http.Error(w, "not an AdmissionReview with a request uid", http.StatusBadRequest)
		return
	}
	answer := AdmissionReview{APIVersion: review.APIVersion, Kind: "AdmissionReview",
		Response: mutate(review.Request)}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(answer); err != nil {
		log.Printf("writing the answer: %v", err)
	}
}

func main() {
	cert := flag.String("cert", "", "serving certificate (PEM)")
	key := flag.String("key", "", "its private key (PEM)")
	listen := flag.String("listen", "127.0.0.1:18444", "address to listen on")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate-vitistack-io-v1alpha1-machine", serveMutate)
	server := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
