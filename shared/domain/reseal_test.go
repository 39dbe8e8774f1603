package domain

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// tagSealer "seals" by prefixing the key id and the binding, so a test sees
// which key and which binding a value went through.
type tagSealer struct{ key string }

func (s tagSealer) Seal(_ context.Context, pt []byte, b Binding) (EncryptedValue, error) {
	return EncryptedValue{IV: "iv", Ciphertext: string(b.AAD()) + "|" + string(pt), KeyID: s.key}, nil
}

func (s tagSealer) Open(_ context.Context, v EncryptedValue, b Binding) ([]byte, error) {
	pt, ok := strings.CutPrefix(v.Ciphertext, string(b.AAD())+"|")
	if !ok {
		return nil, errors.New("wrong binding")
	}
	return []byte(pt), nil
}

func TestSealedFieldsAndReseal(t *testing.T) {
	ctx := context.Background()
	old := tagSealer{key: "old"}
	seal := func(b Binding, pt string) EncryptedValue {
		v, _ := old.Seal(ctx, []byte(pt), b)
		return v
	}
	g := Grant{ID: "grant-1"}
	g.Token.AccessToken = seal(GrantBinding(g, FieldAccessToken), "at")
	g.Token.RefreshToken = &EncryptedValue{} // zero: left out
	sess := Session{ID: "as-1", Flow: SessionFlow{PKCE: &PKCE{}, DeviceCode: &DeviceCodeInfo{}}}
	sess.Flow.PKCE.CodeVerifier = seal(SessionBinding(sess, FieldCodeVerifier), "cv")
	sess.Flow.State = seal(SessionBinding(sess, FieldState), "st")
	sess.Flow.DeviceCode.DeviceCode = seal(SessionBinding(sess, FieldDeviceCode), "dc")

	tests := []struct {
		name   string
		fields []SealedField
		bind   func(string) Binding
		want   []string
	}{
		{"grant", g.SealedFields(), func(f string) Binding { return GrantBinding(g, f) }, []string{FieldAccessToken}},
		{"session", sess.SealedFields(), func(f string) Binding { return SessionBinding(sess, f) }, []string{FieldCodeVerifier, FieldState, FieldDeviceCode}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			for _, f := range tt.fields {
				names = append(names, f.Name)
			}
			if !slices.Equal(names, tt.want) {
				t.Fatalf("fields %v, want %v", names, tt.want)
			}
			if err := Reseal(ctx, tagSealer{key: "new"}, tt.fields, tt.bind); err != nil {
				t.Fatal(err)
			}
			for _, f := range tt.fields {
				if f.Value.KeyID != "new" {
					t.Errorf("field %s: key %q after reseal, want new", f.Name, f.Value.KeyID)
				}
			}
			wrong := func(string) Binding { return Binding{Record: "other"} }
			if err := Reseal(ctx, old, tt.fields, wrong); err == nil || !strings.Contains(err.Error(), "field "+tt.want[0]+": open") {
				t.Errorf("reseal under the wrong binding: %v, want an open error naming the field", err)
			}
		})
	}
	if g.Token.AccessToken.KeyID != "new" || sess.Flow.State.KeyID != "new" {
		t.Error("Reseal did not change the records in place")
	}
}
