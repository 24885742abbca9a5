package bolt

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// recordKinds are the types the store writes and reads, each as a new
// zero value.
var recordKinds = []struct {
	name string
	zero func() any
}{
	{"work item", func() any { return &workItemRecord{} }},
	{"dispatch", func() any { return &bot.Dispatch{} }},
	{"job", func() any { return &jobRecord{} }},
	{"event", func() any { return &bot.Event{} }},
	{"ingress", func() any { return &bot.IngressRecord{} }},
	{"outbox message", func() any { return &bot.OutboxMessage{} }},
	{"approval", func() any { return &bot.Approval{} }},
	{"spend", func() any { return &bot.Spend{} }},
	{"installation", func() any { return &installationRecord{} }},
	{"child run", func() any { return &bot.ChildRun{} }},
	{"background task", func() any { return &bot.BackgroundTask{} }},
	{"package", func() any { return &skills.InstalledPackage{} }},
	{"setting", func() any { return &skills.Setting{} }},
	{"rule", func() any { return &bot.StoredRule{} }},
	{"admin session", func() any { return &bot.AdminSession{} }},
}

// edgeStrings are texts whose JSON is easy to get wrong.
var edgeStrings = []string{
	"", "plain", "bad \xff\xfe utf-8 \xc3", "nul \x00 inside", "line\u2028para\u2029", "<b>&amp;</b>",
	`quote " back \ slash`, "tab\tnew\nline\r", "\x01\x1f\x7f", "é ü 中文 🚀", "\xed\xa0\x80 a surrogate",
	strings.Repeat("long ", 4000), `{"id":""}`,
}

// fill sets every exported field of v (a pointer) from rng: edge strings,
// extreme numbers, times in other zones and the zero time, nil and empty
// slices and maps.
func fill(rng *rand.Rand, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth > 4 || rng.IntN(4) == 0 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(rng, v.Elem(), depth+1)
		return
	}
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		times := []time.Time{{}, time.Date(2026, 11, 25, 1, 2, 3, 456789012, time.UTC),
			time.Date(1999, 12, 31, 23, 59, 59, 1, time.FixedZone("", -(9*3600+30*60))),
			time.Date(2024, 2, 29, 12, 0, 0, 0, time.FixedZone("X", 14*3600)), time.Unix(0, 0)}
		v.Set(reflect.ValueOf(times[rng.IntN(len(times))]))
		return
	case reflect.TypeFor[bot.Thread]():
		threads := []bot.Thread{{}, bot.LocalThread("t1"), bot.SlackThread("T1", "C1", "171.1")}
		v.Set(reflect.ValueOf(threads[rng.IntN(len(threads))]))
		return
	case reflect.TypeFor[json.RawMessage]():
		raws := []string{"", "null", `{"a":[1,2.5e300,"\u2028<>&"]}`, "-0", `"x"`}
		if r := raws[rng.IntN(len(raws))]; r != "" {
			v.SetBytes([]byte(r))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(edgeStrings[rng.IntN(len(edgeStrings))])
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := v.Type().Bits()
		vals := []int64{0, -1, 1, math.MinInt64 >> (64 - bits), math.MaxInt64 >> (64 - bits), 1 << 53, -(1 << 53) - 1}
		v.SetInt(vals[rng.IntN(len(vals))])
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		vals := []uint64{0, 1, math.MaxUint64 >> (64 - v.Type().Bits())}
		v.SetUint(vals[rng.IntN(len(vals))])
	case reflect.Float32, reflect.Float64:
		vals := []float64{0, -1.5, 1e21, 1e-7, 123456789.123456789, math.SmallestNonzeroFloat64, -math.MaxFloat32}
		v.SetFloat(vals[rng.IntN(len(vals))])
	case reflect.Slice:
		switch rng.IntN(3) {
		case 0: // nil
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			n := 1 + rng.IntN(3)
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				fill(rng, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		switch rng.IntN(3) {
		case 0:
		case 1:
			v.Set(reflect.MakeMap(v.Type()))
		default:
			m := reflect.MakeMap(v.Type())
			for range 1 + rng.IntN(3) {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				fill(rng, k, depth+1)
				fill(rng, e, depth+1)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, v.Field(i), depth+1)
			}
		}
	case reflect.Interface:
		anys := []any{nil, "s\u2028", 1.5, -1e300, map[string]any{"k": []any{true, nil}}, []any{}}
		if a := anys[rng.IntN(len(anys))]; a != nil {
			v.Set(reflect.ValueOf(a))
		}
	}
}

// Every kind of record is written byte for byte as encoding/json writes it,
// which is what earlier versions wrote and read, and read back as
// encoding/json reads it: a file written by either version reads the same
// in the other.
func TestRecordsEncodeAsEncodingJSON(t *testing.T) {
	for _, kind := range recordKinds {
		t.Run(kind.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(kind.name))))
			for range 200 {
				v := kind.zero()
				fill(rng, reflect.ValueOf(v).Elem(), 0)
				want, wantErr := json.Marshal(v)
				got, err := marshal(v)
				require.Equal(t, wantErr, err)
				requireSame(t, string(want), string(got))
				if err != nil {
					continue
				}
				stdBack, ourBack := kind.zero(), kind.zero()
				require.Equal(t, json.Unmarshal(want, stdBack), unmarshal(got, ourBack))
				if !reflect.DeepEqual(stdBack, ourBack) {
					a, _ := json.Marshal(stdBack)
					b, _ := json.Marshal(ourBack)
					requireSame(t, string(a), string(b))
					t.Fatalf("%s read back differently: %.2000s", kind.name, got)
				}
			}
		})
	}
}

// requireSame fails unless got is want, showing where they first differ
// rather than two texts of hundreds of kilobytes.
func requireSame(t *testing.T, want, got string) {
	t.Helper()
	if want == got {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	from := max(0, i-100)
	t.Fatalf("differ at byte %d:\nwant …%.300q\ngot  …%.300q", i, want[from:], got[from:])
}

// A corrupt record fails with encoding/json's error, short and naming
// what is wrong rather than repeating the record, and a record nested too
// deep to read fails the same way instead of overflowing the stack.
func TestCorruptRecordsFailAsEncodingJSON(t *testing.T) {
	// A smaller stack than the runtime's gigabyte, so that a parser that
	// recursed into the deep record would die here without first taking
	// the machine's memory.
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	secret := strings.Repeat("the rest of the record ", 1000)
	deep := strings.Repeat("[", 3_000_000) + strings.Repeat("]", 3_000_000)
	for _, in := range []string{
		``, `{`, `nul`, `{"id":1}`, `{"id":"x"} trailing`, `{"id":"x",}`, `{"created_at":"yesterday"}`,
		`{"thread":"nowhere"}`, `{"attempts":1e400}`, `{"attempts":-1}`, `{"attempts":"3"}`, `{"attempts":99999999999999999999}`,
		`{"id":"x","text":"` + secret + `",}`, `{"x":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}`,
		`{"x":` + deep + `}`, `{"id":"` + strings.Repeat("[", maxDepth+1) + `"}`, "\"\xff\"",
	} {
		for _, kind := range recordKinds {
			std, ours := kind.zero(), kind.zero()
			wantErr, err := json.Unmarshal([]byte(in), std), unmarshal([]byte(in), ours)
			require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(err), "%s from %.40q", kind.name, in)
			if err == nil {
				require.Equal(t, std, ours)
			} else {
				require.Less(t, len(err.Error()), 300, "%s from %.40q", kind.name, in)
			}
		}
	}
}

// A corrupt record in the file fails the read naming the record and what
// is wrong with it, and the daemon goes on.
func TestReadCorruptRecordNamesIt(t *testing.T) {
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	s := openTest(t, t.TempDir())
	for _, tc := range []struct{ value, want string }{
		{`{"id":"wi_1","thread":5}`, "decode work_items/0000000000000001: json: cannot unmarshal number into Go struct field"},
		{`{"id":"wi_1","text":"` + strings.Repeat("x", 1<<20) + `",`, "decode work_items/0000000000000001: unexpected end of JSON input"},
		{`{"x":` + strings.Repeat("[", 3_000_000) + strings.Repeat("]", 3_000_000) + `}`, "decode work_items/0000000000000001: invalid character '[' exceeded max depth"},
	} {
		require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(bucketWorkItems)).Put(seqKey(1), []byte(tc.value))
		}))
		err := s.db.View(func(tx *bolt.Tx) error {
			var rec workItemRecord
			_, err := txn{tx}.get(bucketWorkItems, seqKey(1), &rec)
			return err
		})
		require.ErrorContains(t, err, tc.want)
		require.Less(t, len(err.Error()), 300)
	}
	require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketWorkItems)).Delete(seqKey(1))
	}))
}

// FuzzRecordCodec holds the store's codec to encoding/json on any bytes a
// record may hold: what encoding/json reads, it reads the same; where
// encoding/json fails, it fails with the same error or, more lenient,
// reads what encoding/json would have refused; it never panics.
func FuzzRecordCodec(f *testing.F) {
	f.Add([]byte(`{"id":"wi_1","attempts":2,"created_at":"2026-01-02T03:04:05+01:00","thread":"local:t1"}`))
	f.Add([]byte(`{"ID":"x","Text":"\u2028\ud800<>&","labels":null,"meta":{}}`))
	f.Add([]byte(`{"attempts":1e400}`))
	f.Add([]byte(`[[[[{"a":"b"}]]]]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, kind := range recordKinds {
			std, ours := kind.zero(), kind.zero()
			wantErr, err := json.Unmarshal(b, std), unmarshal(b, ours)
			switch {
			case wantErr == nil:
				require.NoError(t, err, kind.name)
				require.Equal(t, std, ours, kind.name)
				want, wantErr := json.Marshal(std)
				got, err := marshal(ours)
				require.Equal(t, wantErr, err, kind.name)
				require.Equal(t, string(want), string(got), kind.name)
			case err != nil:
				require.Equal(t, wantErr.Error(), err.Error(), kind.name)
			}
		}
	})
}
