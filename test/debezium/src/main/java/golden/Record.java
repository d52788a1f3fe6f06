package golden;

import java.io.IOException;
import java.io.Writer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.apache.kafka.connect.storage.StringConverter;

import io.debezium.embedded.Connect;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.transforms.outbox.EventRouter;

/**
 * Records what Debezium makes of the outbox corpus (testdata/debezium/corpus.sql):
 * runs the embedded engine (MySQL connector, snapshot.mode no_data, offsets and
 * schema history in files) against one server of the local stack, inserts the
 * corpus, collects the connector's SourceRecords of the outbox table, then applies
 * the Outbox Event Router (io.debezium.transforms.outbox.EventRouter) in each
 * configuration and Kafka Connect's converters the way a Connect worker does
 * (WorkerSourceTask: key.converter, value.converter, SimpleHeaderConverter for
 * headers), and writes one JSON line per record to
 * OUT/FLAVOUR.ROUTER.FORMAT.jsonl: id (the row's id), topic, partition (the SMT's
 * or murmur2(key) % PARTITIONS, -1 for a null key), key, value (UTF-8 text, null
 * for null) and headers ([name, value] in order). It also copies the engine's
 * offset file to OUT/FLAVOUR.offsets.dat and writes its position to
 * OUT/FLAVOUR.offsets.json (SHOW MASTER STATUS after Debezium stopped).
 *
 * Arguments: FLAVOUR PORT TABLE CORPUS OUT WORKDIR.
 */
public final class Record {
    /** The partition count the golden partitions are computed for. */
    static final int PARTITIONS = 6;

    /** The router configurations: name → EventRouter properties. */
    static Map<String, Map<String, String>> routers() {
        Map<String, Map<String, String>> r = new LinkedHashMap<>();
        r.put("default", Map.of());
        r.put("tombstone", Map.of("route.tombstone.on.empty.payload", "true"));
        r.put("additional", Map.of("table.fields.additional.placement",
                "type:header:eventType,region:envelope:region,aggregatetype:header,shard:partition"));
        r.put("routing", Map.of("route.by.field", "region", "route.topic.replacement", "outbox.${routedByValue}.events",
                "table.field.event.key", "type"));
        r.put("expand", Map.of("table.expand.json.payload", "true"));
        r.put("intkey", Map.of("table.field.event.key", "shard"));
        // route.by.field's value renamed by a regex: Order matches (events.er.Ord), Customer keeps its name
        r.put("regex", Map.of("route.topic.regex", "(?<kind>Ord)(?<rest>.*)", "route.topic.replacement", "events.${rest}.$1"));
        // envelope placement alone: an INT column under an alias, a VARCHAR, with tombstones
        r.put("envelope", Map.of("table.fields.additional.placement", "shard:envelope:shardNo,type:envelope",
                "route.tombstone.on.empty.payload", "true"));
        return r;
    }

    /** The converter formats: name → (converter class, schemas.enable). */
    static final String[][] FORMATS = {
        {"string", "string", ""},
        {"json-schemas", "json", "true"},
        {"json-plain", "json", "false"},
    };

    public static void main(String[] args) throws Exception {
        String flavour = args[0];
        int port = Integer.parseInt(args[1]);
        String table = args[2];
        Path corpus = Path.of(args[3]);
        Path out = Path.of(args[4]);
        Path work = Path.of(args[5]);
        Files.createDirectories(work);
        Files.createDirectories(out);
        String url = "jdbc:mysql://127.0.0.1:" + port + "/im?useSSL=false&allowPublicKeyRetrieval=true&characterEncoding=UTF-8";
        List<String> stmts = corpus(corpus, table);
        String ping = table + "_ping";
        try (Connection c = DriverManager.getConnection(url, "root", "root"); Statement s = c.createStatement()) {
            s.execute("SET NAMES utf8mb4");
            s.execute("DROP TABLE IF EXISTS " + table);
            s.execute("DROP TABLE IF EXISTS " + ping);
            s.execute(stmts.get(0)); // CREATE TABLE
            s.execute("CREATE TABLE " + ping + " (id INT AUTO_INCREMENT PRIMARY KEY)");
        }
        Path offsets = work.resolve("offsets.dat");
        Files.deleteIfExists(offsets);
        Files.deleteIfExists(work.resolve("history.dat"));
        Properties p = new Properties();
        p.setProperty("name", "golden");
        p.setProperty("connector.class", "io.debezium.connector.mysql.MySqlConnector");
        p.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
        p.setProperty("offset.storage.file.filename", offsets.toString());
        p.setProperty("offset.flush.interval.ms", "100");
        p.setProperty("schema.history.internal", "io.debezium.storage.file.history.FileSchemaHistory");
        p.setProperty("schema.history.internal.file.filename", work.resolve("history.dat").toString());
        p.setProperty("database.hostname", "127.0.0.1");
        p.setProperty("database.port", String.valueOf(port));
        p.setProperty("database.user", "root");
        p.setProperty("database.password", "root");
        p.setProperty("database.server.id", String.valueOf(4_190_000 + port));
        p.setProperty("database.ssl.mode", "disabled");
        p.setProperty("topic.prefix", "golden");
        p.setProperty("database.include.list", "im");
        p.setProperty("table.include.list", "im\\." + table + ",im\\." + ping);
        p.setProperty("snapshot.mode", "no_data");
        p.setProperty("snapshot.locking.mode", "none");
        p.setProperty("include.schema.changes", "false");
        BlockingQueue<SourceRecord> q = new LinkedBlockingQueue<>();
        List<Throwable> failed = new ArrayList<>();
        DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> engine = DebeziumEngine.create(Connect.class)
                .using(p)
                .notifying(rec -> q.add(rec.value()))
                .using((success, message, error) -> {
                    if (!success) {
                        System.err.println("engine stopped: " + message);
                        failed.add(error != null ? error : new RuntimeException(message));
                    }
                })
                .build();
        ExecutorService ex = Executors.newSingleThreadExecutor();
        ex.execute(engine);
        List<SourceRecord> rows = new ArrayList<>();
        try (Connection c = DriverManager.getConnection(url, "root", "root"); Statement s = c.createStatement()) {
            s.execute("SET NAMES utf8mb4");
            // Streaming has begun when a ping row comes through (no_data's snapshot
            // takes the position at its start; rows before it would be lost).
            boolean streaming = false;
            for (int i = 0; i < 600 && !streaming && failed.isEmpty(); i++) {
                s.execute("INSERT INTO " + ping + " VALUES ()");
                SourceRecord r = q.poll(500, TimeUnit.MILLISECONDS);
                streaming = r != null;
            }
            if (!streaming) {
                throw new IllegalStateException("Debezium did not stream: " + failed);
            }
            for (String st : stmts.subList(1, stmts.size())) {
                s.execute(st);
            }
            int want = stmts.size() - 1;
            long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
            while (rows.size() < want && System.nanoTime() < deadline) {
                SourceRecord r = q.poll(500, TimeUnit.MILLISECONDS);
                if (r != null && r.topic().equals("golden.im." + table)) {
                    rows.add(r);
                }
            }
            if (rows.size() != want) {
                throw new IllegalStateException(rows.size() + " outbox records from Debezium, want " + want);
            }
        }
        engine.close();
        ex.shutdown();
        ex.awaitTermination(1, TimeUnit.MINUTES);
        String status;
        try (Connection c = DriverManager.getConnection(url, "root", "root"); Statement s = c.createStatement();
                var rs = s.executeQuery("SHOW " + (flavour.startsWith("mariadb") ? "MASTER" : "BINARY LOG") + " STATUS")) {
            rs.next();
            status = "{\"file\": \"" + rs.getString(1) + "\", \"pos\": " + rs.getLong(2) + "}\n";
        }
        Files.copy(offsets, out.resolve(flavour + ".offsets.dat"), StandardCopyOption.REPLACE_EXISTING);
        Files.writeString(out.resolve(flavour + ".offsets.json"), status);

        for (var router : routers().entrySet()) {
            for (String[] f : FORMATS) {
                write(out.resolve(flavour + "." + router.getKey() + "." + f[0] + ".jsonl"), rows, router.getValue(), f);
            }
        }
        System.out.println(flavour + ": " + rows.size() + " records, written to " + out);
    }

    /** corpus returns the corpus's statements with {table} replaced, CREATE TABLE first. */
    static List<String> corpus(Path file, String table) throws IOException {
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            if (line.isBlank() || line.startsWith("--")) {
                continue;
            }
            String st = line.strip();
            if (!st.endsWith(";")) {
                throw new IllegalArgumentException("corpus line does not end with ';': " + line);
            }
            out.add(st.substring(0, st.length() - 1).replace("{table}", table));
        }
        return out;
    }

    static Converter converter(String[] f, boolean isKey) {
        Converter c = f[1].equals("json") ? new JsonConverter() : new StringConverter();
        Map<String, String> cfg = new HashMap<>();
        if (f[1].equals("json")) {
            cfg.put("schemas.enable", f[2]);
        }
        c.configure(cfg, isKey);
        return c;
    }

    static void write(Path file, List<SourceRecord> rows, Map<String, String> routerCfg, String[] f) throws IOException {
        EventRouter<SourceRecord> router = new EventRouter<>();
        router.configure(routerCfg);
        Converter keys = converter(f, true), values = converter(f, false);
        SimpleHeaderConverter hc = new SimpleHeaderConverter();
        hc.configure(Map.of());
        try (Writer w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
            for (SourceRecord raw : rows) {
                String id = ((Struct) ((Struct) raw.value()).get("after")).getString("id");
                // A fresh copy: the router adds its headers to the record's own ConnectHeaders.
                SourceRecord r = router.apply(raw.newRecord(raw.topic(), raw.kafkaPartition(), raw.keySchema(), raw.key(),
                        raw.valueSchema(), raw.value(), raw.timestamp(), raw.headers().duplicate()));
                StringBuilder b = new StringBuilder("{\"id\":").append(quote(id));
                if (r == null) {
                    w.write(b.append(",\"dropped\":true}\n").toString());
                    continue;
                }
                // WorkerSourceTask.convertTransformedRecord: headers first, then key and value.
                List<String[]> hs = new ArrayList<>();
                for (Header h : r.headers()) {
                    byte[] v = hc.fromConnectHeader(r.topic(), h.key(), h.schema(), h.value());
                    hs.add(new String[] {h.key(), text(v)});
                }
                byte[] key = keys.fromConnectData(r.topic(), r.keySchema(), r.key());
                byte[] value = values.fromConnectData(r.topic(), r.valueSchema(), r.value());
                int partition = r.kafkaPartition() != null ? r.kafkaPartition()
                        : key == null ? -1 : Utils.toPositive(Utils.murmur2(key)) % PARTITIONS;
                b.append(",\"topic\":").append(quote(r.topic()));
                b.append(",\"partition\":").append(partition);
                b.append(",\"partition_set\":").append(r.kafkaPartition() != null);
                b.append(",\"key\":").append(quote(text(key)));
                b.append(",\"value\":").append(quote(text(value)));
                b.append(",\"headers\":[");
                for (int i = 0; i < hs.size(); i++) {
                    b.append(i > 0 ? "," : "").append("[").append(quote(hs.get(i)[0])).append(",").append(quote(hs.get(i)[1])).append("]");
                }
                w.write(b.append("]}\n").toString());
            }
        }
        router.close();
    }

    /** text decodes bytes as strict UTF-8 (every golden byte string is text); null stays null. */
    static String text(byte[] b) {
        if (b == null) {
            return null;
        }
        try {
            return StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(b)).toString();
        } catch (CharacterCodingException e) {
            throw new IllegalStateException("not UTF-8: " + java.util.Arrays.toString(b), e);
        }
    }

    /** quote returns s as a JSON string, null as null. */
    static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
