package domain

import (
	"context"
	"fmt"
	"slices"
)

// SealedField is one sealed value of a record and the field name it binds.
// Value points into the record, so resealing it changes the record.
type SealedField struct {
	Name  string
	Value *EncryptedValue
}

// SealedFields lists the sealed values g holds (zero values left out).
func (g *Grant) SealedFields() []SealedField {
	f := []SealedField{{FieldAccessToken, &g.Token.AccessToken}}
	if g.Token.RefreshToken != nil {
		f = append(f, SealedField{FieldRefreshToken, g.Token.RefreshToken})
	}
	return nonZero(f)
}

// SealedFields lists the sealed values s holds (zero values left out).
func (s *Session) SealedFields() []SealedField {
	var f []SealedField
	if s.Flow.PKCE != nil {
		f = append(f, SealedField{FieldCodeVerifier, &s.Flow.PKCE.CodeVerifier})
	}
	f = append(f, SealedField{FieldState, &s.Flow.State})
	if s.Flow.DeviceCode != nil {
		f = append(f, SealedField{FieldDeviceCode, &s.Flow.DeviceCode.DeviceCode})
	}
	return nonZero(f)
}

func nonZero(fields []SealedField) []SealedField {
	return slices.DeleteFunc(fields, func(f SealedField) bool { return f.Value.IsZero() })
}

// Reseal opens each field with its binding and seals it again with sealer
// (so under its current key), replacing the values in place. On error the
// record may be partly resealed in memory: callers write it only on
// success, so what is stored stays unchanged. Plaintexts are cleared as
// soon as they are sealed again.
func Reseal(ctx context.Context, sealer Sealer, fields []SealedField, bind func(field string) Binding) error {
	for _, f := range fields {
		b := bind(f.Name)
		pt, err := sealer.Open(ctx, *f.Value, b)
		if err != nil {
			return fmt.Errorf("field %s: open: %w", f.Name, err)
		}
		v, err := sealer.Seal(ctx, pt, b)
		clear(pt)
		if err != nil {
			return fmt.Errorf("field %s: seal: %w", f.Name, err)
		}
		*f.Value = v
	}
	return nil
}

// KeyIDs maps each key id found on a sealed value in st to the ids of the
// records using it (sorted, each once). Values without a key id are under
// "". Unreadable records are skipped; ListGrants and ListSessions report
// them. Callers compare the keys with their keyring to catch a wrong or
// missing key before serving.
func KeyIDs(ctx context.Context, st interface {
	GrantStore
	SessionStore
}) (map[string][]string, error) {
	out := map[string][]string{}
	add := func(recordID string, fields []SealedField) {
		for _, f := range fields {
			ids := out[f.Value.KeyID]
			if !slices.Contains(ids, recordID) {
				out[f.Value.KeyID] = append(ids, recordID)
			}
		}
	}
	grants, _, err := st.ListGrants(ctx)
	if err != nil {
		return nil, err
	}
	for i := range grants {
		add(grants[i].ID, grants[i].SealedFields())
	}
	sessions, _, err := st.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	for i := range sessions {
		add(sessions[i].ID, sessions[i].SealedFields())
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out, nil
}
