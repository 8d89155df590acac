// MiniHDFS starts a one-DataNode MiniDFSCluster for sluice's tests.
//
// Usage: java -cp CLASSPATH:classes [-Dminihdfs.conf=EXTRA.xml] MiniHDFS BASEDIR [NAMENODE_PORT]
//
// -Dminihdfs.conf names a Hadoop configuration file added on top of the
// settings below: testdata/harness/hdfs's StartSecure writes one that turns
// on Kerberos (hadoop.security.authentication=kerberos, the NameNode's and
// DataNode's principals and keytabs, block access tokens, SASL on data
// transfer); the JVM then also gets -Djava.security.krb5.conf naming the
// harness's KDC.
//
// It listens on 127.0.0.1 only, prints one line "MINIHDFS READY hdfs://127.0.0.1:PORT"
// to stdout when the cluster is active, and shuts the cluster down when its
// standard input reaches end of file (so it never outlives the test process
// that started it) or when it gets SIGTERM.
import java.io.File;
import java.io.InputStream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.security.UserGroupInformation;

public final class MiniHDFS {
  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: MiniHDFS BASEDIR [NAMENODE_PORT]");
      System.exit(2);
    }
    File base = new File(args[0]);
    int port = args.length > 1 ? Integer.parseInt(args[1]) : 0;

    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getAbsolutePath());
    conf.set("dfs.permissions.enabled", "false");
    conf.set("dfs.replication", "1");
    conf.set("dfs.namenode.replication.min", "1");
    conf.set("dfs.heartbeat.interval", "1");
    conf.set("dfs.namenode.heartbeat.recheck-interval", "3000");
    conf.set("dfs.blocksize", "1048576");
    conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    conf.set("dfs.datanode.hostname", "127.0.0.1");
    conf.set("dfs.client.use.datanode.hostname", "true");
    conf.set("dfs.datanode.use.datanode.hostname", "true");
    // The lease soft limit decides how soon another writer may recover a file
    // whose writer died (the kill -9 test); keep it short.
    conf.set("dfs.namenode.lease-recheck-interval-ms", "500");
    String extra = System.getProperty("minihdfs.conf");
    if (extra != null && !extra.isEmpty()) {
      conf.addResource(new Path(extra));
      // UserGroupInformation reads hadoop.security.authentication once per
      // JVM: give it this configuration before any Hadoop class logs in.
      UserGroupInformation.setConfiguration(conf);
    }

    MiniDFSCluster.Builder b = new MiniDFSCluster.Builder(conf)
        .numDataNodes(1)
        .format(true)
        .checkDataNodeHostConfig(true);
    if (port > 0) {
      b.nameNodePort(port);
    }
    final MiniDFSCluster cluster = b.build();
    cluster.waitActive();
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      try {
        cluster.shutdown(true);
      } catch (Throwable t) {
        // best effort on the way out
      }
    }));
    System.out.println("MINIHDFS READY hdfs://127.0.0.1:" + cluster.getNameNodePort());
    System.out.flush();

    InputStream in = System.in;
    byte[] buf = new byte[256];
    while (in.read(buf) >= 0) {
      // wait for end of input
    }
    System.exit(0);
  }
}
