package binlog

import (
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// SHOW SLAVE HOSTS (MariaDB: Server_id) and SHOW REPLICAS (MySQL 8.0.22+:
// Server_Id) both find the replica.
func TestReplicaHost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		rows  [][]any
		want  string
		found bool
	}{
		{"mariadb", []string{"Server_id", "Host", "Port", "Master_id"}, [][]any{{uint64(7), "a", uint64(0), uint64(1)}, {uint64(4242), "vm", uint64(0), uint64(1)}}, "vm", true},
		{"mysql", []string{"Server_Id", "Host", "Port", "Source_Id", "Replica_UUID"}, [][]any{{uint64(4242), "", uint64(3306), uint64(1), "u"}}, "(no report_host)", true},
		{"other id", []string{"Server_Id", "Host"}, [][]any{{uint64(1), "vm"}}, "", false},
		{"no rows", []string{"Server_Id", "Host"}, nil, "", false},
		{"no id column", []string{"Host"}, [][]any{{"vm"}}, "", false},
	} {
		// a result as the client decodes it: fields, then typed values
		rs := mysql.NewResultset(len(tc.names))
		for i, n := range tc.names {
			rs.Fields[i] = &mysql.Field{Name: []byte(n)}
		}
		for _, row := range tc.rows {
			vals := make([]mysql.FieldValue, len(row))
			for i, v := range row {
				switch v := v.(type) {
				case uint64:
					vals[i] = mysql.NewFieldValue(mysql.FieldValueTypeUnsigned, v, nil)
				case string:
					vals[i] = mysql.NewFieldValue(mysql.FieldValueTypeString, 0, []byte(v))
				}
			}
			rs.Values = append(rs.Values, vals)
		}
		host, found := replicaHost(replicaRows(&mysql.Result{Resultset: rs}), 4242)
		if host != tc.want || found != tc.found {
			t.Errorf("%s: replicaHost = %q, %v; want %q, %v", tc.name, host, found, tc.want, tc.found)
		}
	}
}
