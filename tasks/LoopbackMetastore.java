// Hive 2.3's metastore (pyspark's jars) served on one address only. HiveMetaStore.main binds its Thrift socket to
// every interface and has no setting to change that (hive.metastore.thrift.bind.host arrived in Hive 4), and the
// Thrift API takes no credentials: this launcher builds the same handler, processor and transport as its
// unsecured default (set_ugi on) and binds the socket to the host it is given. tasks/metastore.py compiles it.
import java.net.InetSocketAddress;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.TUGIBasedProcessor;
import org.apache.hadoop.hive.metastore.api.ThriftHiveMetastore;
import org.apache.hadoop.hive.thrift.TUGIContainingTransport;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;

public final class LoopbackMetastore {
    private LoopbackMetastore() {
    }

    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        HiveConf conf = new HiveConf(HiveMetaStore.HMSHandler.class);
        ThriftHiveMetastore.Iface handler = HiveMetaStore.newRetryingHMSHandler("new db based metaserver", conf, false);
        TServerSocket socket = new TServerSocket(new InetSocketAddress(host, port));
        TThreadPoolServer.Args server = new TThreadPoolServer.Args(socket)
                .processor(new TUGIBasedProcessor<ThriftHiveMetastore.Iface>(handler))
                .transportFactory(new TUGIContainingTransport.Factory())
                .protocolFactory(new TBinaryProtocol.Factory())
                .minWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMINTHREADS))
                .maxWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMAXTHREADS));
        System.out.println("Started the metastore on " + host + ":" + port);
        new TThreadPoolServer(server).serve();
    }
}
