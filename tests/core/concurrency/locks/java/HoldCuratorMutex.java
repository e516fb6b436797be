// Stands in for a Java Hudi writer: Hudi's ZookeeperBasedLockProvider locks
// <base_path>/<lock_key> with Curator's InterProcessMutex, exactly as done here.
//
// Usage: java HoldCuratorMutex <connectString> <lockPath> <waitMillis>
//   waitMillis < 0: wait as long as it takes (prints WAITING first);
//   otherwise give up after waitMillis and print TIMEOUT.
// On success prints ACQUIRED, then holds the mutex until stdin says "release" or closes,
// then prints RELEASED.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class HoldCuratorMutex {
  public static void main(String[] args) throws Exception {
    String connect = args[0];
    String path = args[1];
    long waitMillis = Long.parseLong(args[2]);
    CuratorFramework client = CuratorFrameworkFactory.builder()
        .connectString(connect)
        .sessionTimeoutMs(4000)
        .connectionTimeoutMs(10000)
        .retryPolicy(new ExponentialBackoffRetry(100, 5))
        .build();
    client.start();
    if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
      System.out.println("NOT_CONNECTED");
      System.exit(2);
    }
    InterProcessMutex mutex = new InterProcessMutex(client, path);
    boolean acquired;
    if (waitMillis < 0) {
      System.out.println("WAITING");
      System.out.flush();
      mutex.acquire();
      acquired = true;
    } else {
      acquired = mutex.acquire(waitMillis, TimeUnit.MILLISECONDS);
    }
    if (!acquired) {
      System.out.println("TIMEOUT");
      System.out.flush();
      client.close();
      return;
    }
    System.out.println("ACQUIRED");
    System.out.flush();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.trim().equals("release")) {
        break;
      }
    }
    mutex.release();
    System.out.println("RELEASED");
    System.out.flush();
    client.close();
  }
}
