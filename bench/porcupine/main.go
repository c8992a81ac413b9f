// Command porcupine-harness checks histories exported by bench/porcupine_compare.py
// with porcupine and prints a verdict and the time taken per history.
//
// Usage: porcupine-harness [-timeout SECONDS] HISTORIES.json
//
// Input: the JSON file bench/porcupine_compare.py writes (format
// "etcdspec-porcupine-histories", version 1): histories, each with a name, a model
// ("register" or "kv") and the operations of our checker's History, field for field
// (process, f, type, request, response, call, ret; ret null for an info operation).
//
// Output: JSON Lines on stdout. The first line is a header (format
// "etcdspec-porcupine-results", version 1, GOMAXPROCS); then one line per history:
// name, verdict ("true", "false" or "unknown": porcupine's Ok, Illegal, Unknown),
// seconds and cpu_seconds of porcupine.CheckOperationsTimeout alone (not reading the
// file, not converting the operations), operations kept, partitions. Exit 0 when every
// history was checked, 4 when the input could not be read (what was wrong on stderr).
//
// The models mirror etcdspec's checker/model_register.py and checker/model_kv.py:
//   - fail operations and info reads (gets) are dropped, as the models' prepare does:
//     they cannot have changed the state.
//   - the real-time order is that of the events: call and return are event
//     positions, all distinct, so porcupine's closed intervals order operations as
//     ours does. An info operation never returns: its return time is MaxInt64, so it
//     may be linearized anywhere after its call, including after every other
//     operation, which is "never took effect".
//   - register: values are JSON scalars compared by their canonical JSON text (so 1
//     and 1.0 are the same, as in Python); the initial value is null. read ok: the
//     register holds the value. write: sets it. cas ok [old, new]: the register held
//     old, now holds new. An info cas either applies (it held old) or, where it cannot,
//     leaves the register as it was: a cas that did not take effect. Keyed values
//     {"key": k, "value": v} are partitioned by key.
//   - kv: one key's value per partition (partitioned by key), null when absent. get ok:
//     the key holds the value got (null: absent). put sets it; append concatenates
//     (absent counts as "").
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"runtime"
	"sort"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	inputFormat   = "etcdspec-porcupine-histories"
	resultFormat  = "etcdspec-porcupine-results"
	formatVersion = 1
)

type exportFile struct {
	Format    string          `json:"format"`
	Version   int             `json:"version"`
	Histories []exportHistory `json:"histories"`
}

type exportHistory struct {
	Name       string     `json:"name"`
	Model      string     `json:"model"`
	Operations []exportOp `json:"operations"`
}

type exportOp struct {
	ID       int             `json:"id"`
	Process  json.RawMessage `json:"process"`
	F        string          `json:"f"`
	Type     string          `json:"type"`
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response"`
	Call     int64           `json:"call"`
	Ret      *int64          `json:"ret"`
}

type result struct {
	Name       string  `json:"name"`
	Model      string  `json:"model"`
	Verdict    string  `json:"verdict"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	Operations int     `json:"operations"`
	Partitions int     `json:"partitions"`
}

// ---------------------------------------------------------------- register

const (
	opRead uint8 = iota
	opWrite
	opCas
	opGet
	opPut
	opAppend
)

type regInput struct {
	key  string
	kind uint8
	arg1 string // write: the value; cas: old; read: the value read
	arg2 string // cas: new
	info bool
}

var registerModel = porcupine.Model{
	Partition: partitionBy(func(op porcupine.Operation) string { return op.Input.(regInput).key }),
	Init:      func() interface{} { return "null" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		st := state.(string)
		in := input.(regInput)
		switch in.kind {
		case opRead:
			return st == in.arg1, st
		case opWrite:
			return true, in.arg1
		default: // cas
			if st == in.arg1 {
				return true, in.arg2
			}
			return in.info, st // an info cas that cannot apply did not take effect
		}
	},
	Hash: func(state interface{}) uint64 { return hashString(state.(string), 0) },
}

func registerOp(op exportOp) (*regInput, error) {
	if op.Type == "fail" {
		return nil, nil
	}
	key, request, err := splitKey(op.Request)
	if err != nil {
		return nil, err
	}
	in := regInput{key: key, info: op.Type == "info"}
	switch op.F {
	case "read":
		if in.info {
			return nil, nil
		}
		_, response, err := splitKey(op.Response)
		if err != nil {
			return nil, err
		}
		in.kind = opRead
		in.arg1, err = scalar(response)
		return &in, err
	case "write":
		in.kind = opWrite
		in.arg1, err = scalar(request)
		return &in, err
	case "cas":
		var pair []json.RawMessage
		if err := json.Unmarshal(request, &pair); err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("cas needs the value [old, new], got %s", request)
		}
		in.kind = opCas
		if in.arg1, err = scalar(pair[0]); err != nil {
			return nil, err
		}
		in.arg2, err = scalar(pair[1])
		return &in, err
	}
	return nil, fmt.Errorf("register has read, write and cas, not %q", op.F)
}

// splitKey: a keyed value {"key": k, "value": v} gives (k, v); anything else ("", it).
func splitKey(raw json.RawMessage) (string, json.RawMessage, error) {
	var keyed map[string]json.RawMessage
	if json.Unmarshal(raw, &keyed) != nil || keyed == nil {
		return "", raw, nil
	}
	keyRaw, ok := keyed["key"]
	if !ok || len(keyed) > 2 {
		return "", nil, fmt.Errorf(`a keyed value must be {"key": k, "value": v}, got %s`, raw)
	}
	var key string
	if json.Unmarshal(keyRaw, &key) != nil {
		key = string(keyRaw) // a non-string key, by its JSON text
	}
	value, ok := keyed["value"]
	if !ok {
		value = json.RawMessage("null")
	}
	return key, value, nil
}

// scalar: a JSON scalar's canonical text (numbers compare by value, as in Python).
func scalar(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "null", nil
	}
	var value interface{}
	if err := json.Unmarshal(raw, &value); err != nil {
		return "", err
	}
	switch value.(type) {
	case map[string]interface{}, []interface{}:
		return "", fmt.Errorf("register values are scalars, got %s", raw)
	}
	text, err := json.Marshal(value)
	return string(text), err
}

// ---------------------------------------------------------------- kv

type kvInput struct {
	key   string
	kind  uint8
	value string
}

type kvOutput struct {
	present bool // get: a value was returned (false: null, the key is absent)
	value   string
}

type kvState struct {
	present bool
	value   string
}

var kvModel = porcupine.Model{
	Partition: partitionBy(func(op porcupine.Operation) string { return op.Input.(kvInput).key }),
	Init:      func() interface{} { return kvState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		st := state.(kvState)
		in := input.(kvInput)
		switch in.kind {
		case opGet:
			out := output.(kvOutput)
			return st.present == out.present && st.value == out.value, st
		case opPut:
			return true, kvState{true, in.value}
		default: // append
			return true, kvState{true, st.value + in.value}
		}
	},
	Hash: func(state interface{}) uint64 {
		st := state.(kvState)
		var present byte
		if st.present {
			present = 1
		}
		return hashString(st.value, present)
	},
}

type kvRequest struct {
	Key   *string `json:"key"`
	Value *string `json:"value"`
}

func kvOp(op exportOp) (*kvInput, *kvOutput, error) {
	if op.Type == "fail" {
		return nil, nil, nil
	}
	var request kvRequest
	if json.Unmarshal(op.Request, &request) != nil || request.Key == nil {
		return nil, nil, fmt.Errorf(`the value must be {"key": "k", ...}, got %s`, op.Request)
	}
	in := kvInput{key: *request.Key}
	switch op.F {
	case "get":
		if op.Type == "info" {
			return nil, nil, nil
		}
		var response map[string]json.RawMessage
		if json.Unmarshal(op.Response, &response) != nil {
			return nil, nil, fmt.Errorf(`a get response must be {"key": k, "value": v}, got %s`, op.Response)
		}
		raw, ok := response["value"]
		if !ok {
			return nil, nil, fmt.Errorf(`a get response must be {"key": k, "value": v}, got %s`, op.Response)
		}
		in.kind = opGet
		var value *string
		if err := json.Unmarshal(raw, &value); err != nil {
			return nil, nil, fmt.Errorf("kv values are strings, got %s", raw)
		}
		if value == nil {
			return &in, &kvOutput{}, nil
		}
		return &in, &kvOutput{true, *value}, nil
	case "put", "append":
		if request.Value == nil {
			return nil, nil, fmt.Errorf("kv values are strings, got %s", op.Request)
		}
		in.kind = opPut
		if op.F == "append" {
			in.kind = opAppend
		}
		in.value = *request.Value
		return &in, &kvOutput{}, nil
	}
	return nil, nil, fmt.Errorf("kv has get, put and append, not %q", op.F)
}

// ---------------------------------------------------------------- shared

func partitionBy(key func(porcupine.Operation) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(history []porcupine.Operation) [][]porcupine.Operation {
		parts := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := key(op)
			parts[k] = append(parts[k], op)
		}
		keys := make([]string, 0, len(parts))
		for k := range parts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, parts[k])
		}
		return out
	}
}

func hashString(s string, extra byte) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	h.Write([]byte{extra})
	return h.Sum64()
}

// convert turns one exported history into porcupine operations for its model.
func convert(history exportHistory) (porcupine.Model, []porcupine.Operation, int, error) {
	var model porcupine.Model
	switch history.Model {
	case "register":
		model = registerModel
	case "kv":
		model = kvModel
	default:
		return model, nil, 0, fmt.Errorf("unknown model %q (register or kv)", history.Model)
	}
	clients := map[string]int{}
	var ops []porcupine.Operation
	keys := map[string]bool{}
	for _, op := range history.Operations {
		var input, output interface{}
		var key string
		if history.Model == "register" {
			in, err := registerOp(op)
			if err != nil {
				return model, nil, 0, fmt.Errorf("op %d: %w", op.ID, err)
			}
			if in == nil {
				continue
			}
			input, output, key = *in, nil, in.key
		} else {
			in, out, err := kvOp(op)
			if err != nil {
				return model, nil, 0, fmt.Errorf("op %d: %w", op.ID, err)
			}
			if in == nil {
				continue
			}
			input, output, key = *in, *out, in.key
		}
		keys[key] = true
		client, seen := clients[string(op.Process)]
		if !seen {
			client = len(clients)
			clients[string(op.Process)] = client
		}
		ret := int64(math.MaxInt64)
		if op.Ret != nil {
			ret = *op.Ret
		}
		ops = append(ops, porcupine.Operation{
			ClientId: client, Input: input, Call: op.Call, Output: output, Return: ret,
		})
	}
	return model, ops, len(keys), nil
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &usage) != nil {
		return 0
	}
	return float64(usage.Utime.Nano()+usage.Stime.Nano()) / 1e9
}

func verdict(res porcupine.CheckResult) string {
	switch res {
	case porcupine.Ok:
		return "true"
	case porcupine.Illegal:
		return "false"
	}
	return "unknown"
}

func main() {
	timeout := flag.Float64("timeout", 0, "seconds per history (0: none); out of time is unknown")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: porcupine-harness [-timeout SECONDS] HISTORIES.json")
		os.Exit(2)
	}
	data, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	var file exportFile
	if err := json.Unmarshal(data, &file); err != nil {
		fmt.Fprintf(os.Stderr, "%s: not JSON: %v\n", flag.Arg(0), err)
		os.Exit(4)
	}
	if file.Format != inputFormat || file.Version != formatVersion {
		fmt.Fprintf(os.Stderr, "%s: format %q version %d; this harness reads %q version %d\n",
			flag.Arg(0), file.Format, file.Version, inputFormat, formatVersion)
		os.Exit(4)
	}
	out := json.NewEncoder(os.Stdout)
	out.Encode(map[string]interface{}{
		"format": resultFormat, "version": formatVersion,
		"gomaxprocs": runtime.GOMAXPROCS(0), "go": runtime.Version(),
	})
	limit := time.Duration(*timeout * float64(time.Second))
	for _, history := range file.Histories {
		model, ops, partitions, err := convert(history)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", history.Name, err)
			os.Exit(4)
		}
		runtime.GC() // the previous history's garbage is not this one's cost
		start, startCPU := time.Now(), cpuSeconds()
		res := porcupine.CheckOperationsTimeout(model, ops, limit)
		seconds, cpu := time.Since(start).Seconds(), cpuSeconds()-startCPU
		out.Encode(result{
			Name: history.Name, Model: history.Model, Verdict: verdict(res),
			Seconds: seconds, CPUSeconds: cpu, Operations: len(ops), Partitions: partitions,
		})
	}
}
