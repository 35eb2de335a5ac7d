package streammap_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/nudgehq/nudge/internal/local/streammap"
)

// everyType is an item with every attribute type, at the top, in a list
// and in a map, nested three deep.
func everyType() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"s":     &types.AttributeValueMemberS{Value: "x \"quoted\" ü"},
		"empty": &types.AttributeValueMemberS{Value: ""},
		"n":     &types.AttributeValueMemberN{Value: "1.50"},
		"b":     &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 255}},
		"t":     &types.AttributeValueMemberBOOL{Value: true},
		"f":     &types.AttributeValueMemberBOOL{Value: false},
		"null":  &types.AttributeValueMemberNULL{Value: true},
		"ss":    &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":    &types.AttributeValueMemberNS{Value: []string{"1", "-2.5e3"}},
		"bs":    &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberS{Value: "in a list"},
			&types.AttributeValueMemberN{Value: "7"},
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"deep": &types.AttributeValueMemberL{Value: []types.AttributeValue{
					&types.AttributeValueMemberNULL{Value: true},
					&types.AttributeValueMemberBOOL{Value: false},
					&types.AttributeValueMemberSS{Value: []string{"z"}},
				}},
			}},
			&types.AttributeValueMemberL{},
		}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"inner": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"b":  &types.AttributeValueMemberB{Value: []byte("hi")},
				"bs": &types.AttributeValueMemberBS{Value: [][]byte{[]byte("yo")}},
				"ns": &types.AttributeValueMemberNS{Value: []string{"-1"}},
				"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberB{}, &types.AttributeValueMemberM{}}},
			}},
			"n": &types.AttributeValueMemberN{Value: "0"},
		}},
	}
}

// TestImageWritesDynamoDBJSON: every type, nested, in the JSON Lambda's
// events carry (pinned).
func TestImageWritesDynamoDBJSON(t *testing.T) {
	t.Parallel()
	img, err := streammap.Image(everyType())
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(img)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"b":{"B":"AAEC/w=="},"bs":{"BS":["AQ==","AgM="]},"empty":{"S":""},"f":{"BOOL":false},` +
		`"l":{"L":[{"S":"in a list"},{"N":"7"},{"M":{"deep":{"L":[{"NULL":true},{"BOOL":false},{"SS":["z"]}]}}},{"L":[]}]},` +
		`"m":{"M":{"inner":{"M":{"b":{"B":"aGk="},"bs":{"BS":["eW8="]},"l":{"L":[{"B":""},{"M":{}}]},"ns":{"NS":["-1"]}}},"n":{"N":"0"}}},` +
		`"n":{"N":"1.50"},"ns":{"NS":["1","-2.5e3"]},"null":{"NULL":true},"s":{"S":"x \"quoted\" ü"},"ss":{"SS":["a","b"]},"t":{"BOOL":true}}`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestImageRoundTripsThroughAWSLambdaGo: what Image writes, aws-lambda-go's
// events.DynamoDBAttributeValue reads back as the same values, type by
// type, at every depth: what the outcomes function will see.
func TestImageRoundTripsThroughAWSLambdaGo(t *testing.T) {
	t.Parallel()
	item := everyType()
	img, err := streammap.Image(item)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(img)
	var decoded map[string]events.DynamoDBAttributeValue
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatalf("aws-lambda-go cannot read the image: %v", err)
	}
	if len(decoded) != len(item) {
		t.Fatalf("decoded %d attributes, want %d", len(decoded), len(item))
	}
	for name, v := range item {
		same(t, name, v, decoded[name])
	}
}

// same fails t unless got (aws-lambda-go's) holds the value want (the
// SDK's) holds.
func same(t *testing.T, path string, want types.AttributeValue, got events.DynamoDBAttributeValue) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: "+format, append([]any{path}, args...)...)
	}
	switch w := want.(type) {
	case *types.AttributeValueMemberS:
		if got.DataType() != events.DataTypeString || got.String() != w.Value {
			fail("got %v %q, want S %q", got.DataType(), got.String(), w.Value)
		}
	case *types.AttributeValueMemberN:
		if got.DataType() != events.DataTypeNumber || got.Number() != w.Value {
			fail("got %v, want N %q", got.DataType(), w.Value)
		}
	case *types.AttributeValueMemberB:
		if got.DataType() != events.DataTypeBinary || !bytes.Equal(got.Binary(), w.Value) {
			fail("got %v, want B %v", got.DataType(), w.Value)
		}
	case *types.AttributeValueMemberBOOL:
		if got.DataType() != events.DataTypeBoolean || got.Boolean() != w.Value {
			fail("got %v, want BOOL %v", got.DataType(), w.Value)
		}
	case *types.AttributeValueMemberNULL:
		if !got.IsNull() {
			fail("got %v, want NULL", got.DataType())
		}
	case *types.AttributeValueMemberSS:
		if got.DataType() != events.DataTypeStringSet || strings.Join(got.StringSet(), "\x00") != strings.Join(w.Value, "\x00") {
			fail("got %v, want SS %q", got.DataType(), w.Value)
		}
	case *types.AttributeValueMemberNS:
		if got.DataType() != events.DataTypeNumberSet || strings.Join(got.NumberSet(), ",") != strings.Join(w.Value, ",") {
			fail("got %v, want NS %q", got.DataType(), w.Value)
		}
	case *types.AttributeValueMemberBS:
		if got.DataType() != events.DataTypeBinarySet || len(got.BinarySet()) != len(w.Value) {
			fail("got %v, want BS of %d", got.DataType(), len(w.Value))
			return
		}
		for i, b := range w.Value {
			if !bytes.Equal(got.BinarySet()[i], b) {
				fail("BS[%d] = %v, want %v", i, got.BinarySet()[i], b)
			}
		}
	case *types.AttributeValueMemberL:
		if got.DataType() != events.DataTypeList || len(got.List()) != len(w.Value) {
			fail("got %v, want L of %d", got.DataType(), len(w.Value))
			return
		}
		for i, e := range w.Value {
			same(t, path+"["+string(rune('0'+i))+"]", e, got.List()[i])
		}
	case *types.AttributeValueMemberM:
		if got.DataType() != events.DataTypeMap || len(got.Map()) != len(w.Value) {
			fail("got %v, want M of %d", got.DataType(), len(w.Value))
			return
		}
		for k, e := range w.Value {
			same(t, path+"."+k, e, got.Map()[k])
		}
	default:
		fail("unexpected %T", want)
	}
}

// TestImageRefusesWhatItCannotWrite: a value of a type the SDK does not
// know, or a nil value, is an error naming the attribute's path.
func TestImageRefusesWhatItCannotWrite(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		item map[string]types.AttributeValue
		want string
	}{
		{map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{}, &types.UnknownUnionMember{Tag: "X"}}}}}},
			`attribute "m"."l"[1] has a type the SDK does not know ("X")`},
		{map[string]types.AttributeValue{"a": nil}, `attribute "a" has no value`},
	} {
		if _, err := streammap.Image(c.item); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error with %q", err, c.want)
		}
	}
	if img, err := streammap.Image(nil); img != nil || err != nil {
		t.Fatalf("a nil item: %v, %v; want nil, nil", img, err)
	}
}
