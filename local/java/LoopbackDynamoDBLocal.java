// DynamoDB Local, listening on one address only (127.0.0.1 unless -Dturnstile.host says otherwise).
//
// Why this file: DynamoDB Local 3.x has no option to choose the address it listens on. Its
// ServerRunner builds a Jetty server with `new Server(port)`, which listens on every interface,
// so anyone who can reach the machine could read and write the tables with any credentials.
// This launcher builds the server through the same public factory the jar's own main uses
// (ServerRunner.createServerFromCommandLineArgs, same command line), then sets the host of its
// Jetty connector before starting it. Reaching the connector needs the private field `server` of
// DynamoDBProxyServer: the one private use, confined here and checked by
// tests/integration/test_local_binding.py, which fails if a new DynamoDB Local changes it (the
// launcher then refuses to start rather than listen everywhere).
//
// Run with Java's single-file source launcher (java 11+, needs the jdk.compiler module):
//   java -cp DynamoDBLocal.jar -Djava.library.path=... LoopbackDynamoDBLocal.java -inMemory -port N

import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        String host = System.getProperty("turnstile.host", "127.0.0.1");
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        Connector[] connectors = server.getConnectors();
        if (connectors.length == 0) {
            throw new IllegalStateException("DynamoDB Local has no connector to bind");
        }
        for (Connector connector : connectors) {
            if (!(connector instanceof ServerConnector)) {
                throw new IllegalStateException("unexpected connector " + connector.getClass());
            }
            ((ServerConnector) connector).setHost(host);
        }
        proxy.start();
        proxy.join();
    }
}
