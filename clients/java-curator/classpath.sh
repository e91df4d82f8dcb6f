# The classpath of the java-curator adapter: Debian's jars in /usr/share/java
# (libcurator-recipes-java and what it pulls in). Sourced by `adapter` and `build`.
JARS=/usr/share/java
CP="$JARS/curator-recipes.jar:$JARS/curator-framework.jar:$JARS/curator-client.jar"
CP="$CP:$JARS/zookeeper.jar:$JARS/zookeeper-jute.jar:$JARS/guava.jar"
CP="$CP:$JARS/slf4j-api.jar:$JARS/slf4j-simple.jar"
CP="$CP:$JARS/jackson-databind.jar:$JARS/jackson-core.jar:$JARS/jackson-annotations.jar"
