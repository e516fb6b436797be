import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * Java's spelling of a double or a float, as Java Hudi's key generators spell a record key
 * (String.valueOf). Reads lines "d <64-bit hex>" or "f <32-bit hex>" (the value's IEEE bits, so
 * NaN, -0.0 and every float reach Java exactly) and prints one spelled value per line.
 */
public class JavaNumberText {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            String[] kv = line.trim().split(" ");
            if (kv[0].equals("d")) {
                out.append(String.valueOf(Double.longBitsToDouble(Long.parseUnsignedLong(kv[1], 16))));
            } else {
                out.append(String.valueOf(Float.intBitsToFloat(Integer.parseUnsignedInt(kv[1], 16))));
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
