import java.sql.*;

public class Orders {
    private String password = "hunter22";

    public ResultSet find(Connection conn, String customer) throws SQLException {
        Statement st = conn.createStatement();
        return st.executeQuery("SELECT * FROM orders WHERE customer = '" + customer + "'");
    }

    public int Count(int[][][] cube) {
        int total = 0;
        for (int i = 0; i < cube.length; i++) {
            for (int j = 0; j < cube[i].length; j++) {
                for (int k = 0; k < cube[i][j].length; k++) {
                    if (cube[i][j][k] > 0 && total < 100) {
                        total++;
                    }
                }
            }
        }
        return total;
    }

    public void run(String cmd) throws Exception {
        Runtime.getRuntime().exec(cmd);
    }
}
