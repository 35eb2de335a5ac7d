package streammap

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Image converts an item's attributes, as DynamoDB Streams returns them, to
// the DynamoDB JSON of Lambda's stream events: each value an object with one
// key naming its type ({"S": "x"}, {"N": "1.5"}, {"B": base64}, {"BOOL":
// true}, {"NULL": true}, {"SS": […]}, {"NS": […]}, {"BS": […]}, {"L": […]},
// {"M": {…}}), nested to any depth. A nil map is nil. A value of a type the
// SDK does not know (types.UnknownUnionMember) or a nil value is an error
// naming the attribute's path.
func Image(item map[string]types.AttributeValue) (map[string]json.RawMessage, error) {
	if item == nil {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(item))
	for _, name := range sortedKeys(item) {
		v, err := attribute(item[name], strconv.Quote(name))
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("streammap: attribute %s: %w", strconv.Quote(name), err)
		}
		out[name] = b
	}
	return out, nil
}

// attribute returns av as a value that encoding/json writes as DynamoDB
// JSON. path names the attribute in errors (`"m"."l"[1]`).
func attribute(av types.AttributeValue, path string) (any, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return map[string]string{"S": v.Value}, nil
	case *types.AttributeValueMemberN:
		return map[string]string{"N": v.Value}, nil
	case *types.AttributeValueMemberB:
		return map[string][]byte{"B": nonNil(v.Value)}, nil // encoding/json writes []byte as base64, as DynamoDB JSON does
	case *types.AttributeValueMemberBOOL:
		return map[string]bool{"BOOL": v.Value}, nil
	case *types.AttributeValueMemberNULL:
		return map[string]bool{"NULL": true}, nil // DynamoDB's NULL is always true
	case *types.AttributeValueMemberSS:
		return map[string][]string{"SS": nonNil(v.Value)}, nil
	case *types.AttributeValueMemberNS:
		return map[string][]string{"NS": nonNil(v.Value)}, nil
	case *types.AttributeValueMemberBS:
		set := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			set[i] = nonNil(b)
		}
		return map[string][][]byte{"BS": set}, nil
	case *types.AttributeValueMemberL:
		list := make([]any, len(v.Value))
		for i, e := range v.Value {
			x, err := attribute(e, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			list[i] = x
		}
		return map[string][]any{"L": list}, nil
	case *types.AttributeValueMemberM:
		m := make(map[string]any, len(v.Value))
		for _, k := range sortedKeys(v.Value) {
			x, err := attribute(v.Value[k], path+"."+strconv.Quote(k))
			if err != nil {
				return nil, err
			}
			m[k] = x
		}
		return map[string]map[string]any{"M": m}, nil
	case *types.UnknownUnionMember:
		return nil, fmt.Errorf("streammap: attribute %s has a type the SDK does not know (%q): update aws-sdk-go-v2/service/dynamodbstreams", path, v.Tag)
	case nil:
		return nil, fmt.Errorf("streammap: attribute %s has no value (nil)", path)
	default:
		return nil, fmt.Errorf("streammap: attribute %s has an unexpected type %T", path, av)
	}
}

// nonNil returns s, or an empty slice for nil, so that a value is written as
// [] (or "" for bytes), never as null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// sortedKeys returns m's keys in order, so that an error names the same
// attribute every time.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
