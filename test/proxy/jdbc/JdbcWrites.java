import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;

/**
 * An agent's JDBC program, run with `java -cp postgresql.jar JdbcWrites.java` against the proxy (PGTOLL_JDBC_URL,
 * PGTOLL_JDBC_USER, PGTOLL_JDBC_PASSWORD). pgjdbc executes a write whose result it does not need with an Execute
 * row limit of 1, and reads a result in a transaction with a fetch size in batches of that many rows. Prints what
 * it saw as one JSON object; an SQLException ends it with its SQLSTATE and message on stdout and exit code 1.
 */
public class JdbcWrites {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.setProperty("user", System.getenv("PGTOLL_JDBC_USER"));
    props.setProperty("password", System.getenv("PGTOLL_JDBC_PASSWORD"));
    props.setProperty("sslmode", "disable");
    List<String> out = new ArrayList<>();
    String step = "connect";
    try (Connection conn = DriverManager.getConnection(System.getenv("PGTOLL_JDBC_URL"), props)) {
      step = "autocommit executeUpdate";
      try (Statement st = conn.createStatement()) {
        out.add(field("autocommitUpdated", st.executeUpdate("UPDATE items SET name = name || '-a' WHERE id <= 3")));
      }

      step = "executeUpdate in a transaction";
      conn.setAutoCommit(false);
      try (Statement st = conn.createStatement()) {
        out.add(field("transactionUpdated", st.executeUpdate("UPDATE items SET name = 'in-tx' WHERE id = 4")));
      }
      step = "prepared INSERT in a transaction";
      try (PreparedStatement ps = conn.prepareStatement("INSERT INTO orders (item_id, name) VALUES (?, ?)")) {
        ps.setInt(1, 4);
        ps.setString(2, "jdbc-prepared");
        out.add(field("preparedInserted", ps.executeUpdate()));
      }
      conn.commit();

      step = "UPDATE RETURNING read with a fetch size";
      try (Statement st = conn.createStatement()) {
        st.setFetchSize(2);
        List<Integer> ids = new ArrayList<>();
        try (ResultSet rs = st.executeQuery("UPDATE items SET name = name || '-r' WHERE id >= 6 AND id <= 10 RETURNING id")) {
          while (rs.next()) ids.add(rs.getInt(1));
        }
        out.add(field("returnedInBatches", ids.toString()));
      }
      conn.commit();
      conn.setAutoCommit(true);

      step = "executeBatch";
      try (PreparedStatement ps = conn.prepareStatement("INSERT INTO orders (item_id, name) VALUES (?, ?)")) {
        for (int i = 1; i <= 3; i++) {
          ps.setInt(1, i);
          ps.setString(2, "jdbc-batch");
          ps.addBatch();
        }
        out.add(field("batchCounts", Arrays.toString(ps.executeBatch())));
      }

      step = "getGeneratedKeys";
      try (PreparedStatement ps =
          conn.prepareStatement("INSERT INTO items (name) VALUES (?)", Statement.RETURN_GENERATED_KEYS)) {
        ps.setString(1, "jdbc-key");
        int inserted = ps.executeUpdate();
        try (ResultSet keys = ps.getGeneratedKeys()) {
          keys.next();
          out.add(field("generatedInserted", inserted));
          out.add(field("generatedKey", keys.getInt("id")));
        }
      }
      try (Statement st = conn.createStatement()) {
        int inserted =
            st.executeUpdate(
                "INSERT INTO items (name) SELECT 'jdbc-keys' FROM generate_series(1, 3)", new String[] {"id"});
        List<Integer> keys = new ArrayList<>();
        try (ResultSet rs = st.getGeneratedKeys()) {
          while (rs.next()) keys.add(rs.getInt(1));
        }
        out.add(field("generatedManyInserted", inserted));
        out.add(field("generatedKeys", keys.toString()));
      }
    } catch (SQLException e) {
      out.add(field("failedAt", step));
      out.add(field("sqlState", e.getSQLState()));
      out.add(field("error", e.getMessage()));
      System.out.println("{" + String.join(",", out) + "}");
      System.exit(1);
    }
    System.out.println("{" + String.join(",", out) + "}");
  }

  private static String field(String name, int value) {
    return "\"" + name + "\":" + value;
  }

  private static String field(String name, String value) {
    String escaped = value == null ? "" : value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    return "\"" + name + "\":\"" + escaped + "\"";
  }
}
