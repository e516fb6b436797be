// Dumps every `hoodie.*` configuration key Hudi's jars define, read by reflection, as JSON.
//
// Why: this project takes Hudi users' own option dicts (docs/configuration.md). To tell a key of
// Hudi's (honored, no effect here, or refused with a reason) from a typo, it needs Hudi's whole
// key set, and that set must come from Hudi itself, not from a hand-copied list that drifts.
// Hudi declares each key as a `ConfigProperty` constant: a `public static final` field of a
// config class (HoodieWriteConfig, HoodieIndexConfig, ...), or a field of a Scala object
// (DataSourceWriteOptions$.MODULE$, ...). Hudi's own doc generator finds them with
// org.reflections, which the bundle does not ship, so this walks the jar's class entries itself.
//
// Usage: java -cp BUNDLE.jar:SPARK_JARS/*:CLASSES DumpHudiOptions BUNDLE.jar OUT.json SOURCE
// (SOURCE: what to record as the origin, e.g. the bundle's Maven coordinates)
// Run by scripts/regenerate-hudi-options.sh; the output is sorted by key, so a rerun with the
// same jar writes the same bytes.
import java.io.*;
import java.lang.annotation.Annotation;
import java.lang.reflect.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.jar.*;

public class DumpHudiOptions {
    static final String CONFIG_PROPERTY = "org.apache.hudi.common.config.ConfigProperty";
    static final String CONFIG_CLASS_PROPERTY = "org.apache.hudi.common.config.ConfigClassProperty";

    /** One key, as found in its first (annotated, then alphabetical) defining class. */
    static final class Entry {
        String key, defaultValue, group, subGroup, className, since, deprecated, doc;
        List<String> alternatives = new ArrayList<>();
        boolean advanced, hasDefault, inferred;
        boolean annotated;
    }

    public static void main(String[] args) throws Exception {
        String jarPath = args[0];
        String out = args[1];
        String source = args.length > 2 ? args[2] : new File(jarPath).getName();
        ClassLoader loader = DumpHudiOptions.class.getClassLoader();
        Class<?> propertyClass = Class.forName(CONFIG_PROPERTY, false, loader);
        @SuppressWarnings("unchecked")
        Class<? extends Annotation> groupAnnotation =
            (Class<? extends Annotation>) Class.forName(CONFIG_CLASS_PROPERTY, false, loader);

        List<String> classNames = new ArrayList<>();
        try (JarFile jar = new JarFile(jarPath)) {
            for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
                String name = e.nextElement().getName();
                if (name.endsWith(".class") && !name.startsWith("META-INF")
                        && (name.startsWith("org/apache/hudi/") || name.startsWith("org/apache/spark/sql/hudi/"))) {
                    classNames.add(name.substring(0, name.length() - 6).replace('/', '.'));
                }
            }
        }
        Collections.sort(classNames);
        Map<String, Entry> byKey = new TreeMap<>();
        int classesWithKeys = 0;
        for (String name : classNames) {
            Class<?> cls;
            Field[] fields;
            try {
                cls = Class.forName(name, false, loader);
                fields = cls.getDeclaredFields();
            } catch (Throwable t) {  // a class whose dependencies the classpath lacks: no config there
                continue;
            }
            List<Object> properties = new ArrayList<>();
            try {
                Object module = null;
                for (Field f : fields) {
                    if (Modifier.isStatic(f.getModifiers()) && f.getName().equals("MODULE$")) {
                        f.setAccessible(true);
                        module = f.get(null);  // a Scala object: its vals are instance fields
                    }
                }
                for (Field f : fields) {
                    if (!propertyClass.isAssignableFrom(f.getType())) continue;
                    boolean isStatic = Modifier.isStatic(f.getModifiers());
                    if (!isStatic && module == null) continue;
                    f.setAccessible(true);
                    Object p = f.get(isStatic ? null : module);
                    if (p != null) properties.add(p);
                }
            } catch (Throwable t) {  // a static initialiser that needs a runtime (a Spark session, ...)
                System.err.println("skipped " + name + ": " + t);
                continue;
            }
            if (properties.isEmpty()) continue;
            classesWithKeys++;
            Annotation group = cls.getAnnotation(groupAnnotation);
            for (Object p : properties) {
                Entry e = describe(p, propertyClass, cls, group, groupAnnotation);
                if (e == null || !e.key.startsWith("hoodie.")) continue;
                Entry seen = byKey.get(e.key);
                // prefer the class Hudi's docs file the key under (annotated), then the first by name
                if (seen == null || (e.annotated && !seen.annotated)) byKey.put(e.key, e);
            }
        }
        try (Writer w = new OutputStreamWriter(new FileOutputStream(out), StandardCharsets.UTF_8)) {
            w.write("{\"source\": " + q(source) + ", \"keys\": [\n");
            int i = 0;
            for (Entry e : byKey.values()) {
                w.write("  {");
                w.write("\"key\": " + q(e.key));
                w.write(", \"alternatives\": [");
                for (int j = 0; j < e.alternatives.size(); j++) w.write((j > 0 ? ", " : "") + q(e.alternatives.get(j)));
                w.write("]");
                w.write(", \"default\": " + (e.hasDefault ? q(e.defaultValue) : "null"));
                w.write(", \"inferred\": " + e.inferred);
                w.write(", \"group\": " + q(e.group));
                w.write(", \"subgroup\": " + q(e.subGroup));
                w.write(", \"class\": " + q(e.className));
                w.write(", \"since\": " + q(e.since));
                w.write(", \"deprecated\": " + q(e.deprecated));
                w.write(", \"advanced\": " + e.advanced);
                w.write(", \"doc\": " + q(e.doc));
                w.write(++i < byKey.size() ? "},\n" : "}\n");
            }
            w.write("]}\n");
        }
        System.err.println("DumpHudiOptions: " + byKey.size() + " keys from " + classesWithKeys + " classes of "
                           + classNames.size());
    }

    static Entry describe(Object p, Class<?> propertyClass, Class<?> cls, Annotation group,
                          Class<? extends Annotation> groupAnnotation) throws Exception {
        Entry e = new Entry();
        e.key = (String) call(p, "key");
        if (e.key == null) return null;
        e.hasDefault = (Boolean) call(p, "hasDefaultValue");
        Object dflt = e.hasDefault ? call(p, "defaultValue") : null;
        e.defaultValue = dflt == null ? null : String.valueOf(dflt);
        e.hasDefault = e.hasDefault && dflt != null;
        e.inferred = (Boolean) call(p, "hasInferFunction");
        for (Object a : (List<?>) call(p, "getAlternatives")) e.alternatives.add(String.valueOf(a));
        e.since = option(call(p, "getSinceVersion"));
        e.deprecated = option(call(p, "getDeprecatedVersion"));
        e.advanced = (Boolean) call(p, "isAdvanced");
        e.doc = firstSentence((String) call(p, "doc"));
        String name = cls.getName();
        if (name.endsWith("$")) name = name.substring(0, name.length() - 1);
        e.className = name;
        if (group != null) {
            e.annotated = true;
            e.group = String.valueOf(groupAnnotation.getMethod("groupName").invoke(group));
            e.subGroup = String.valueOf(groupAnnotation.getMethod("subGroupName").invoke(group));
        } else {
            e.group = "";
            e.subGroup = "";
        }
        return e;
    }

    static Object call(Object target, String method) throws Exception {
        Method m = target.getClass().getMethod(method);
        m.setAccessible(true);
        return m.invoke(target);
    }

    /** Hudi's own Option (not java.util.Optional): isPresent() / get(). */
    static String option(Object opt) throws Exception {
        if (opt == null) return "";
        if (!(Boolean) call(opt, "isPresent")) return "";
        return String.valueOf(call(opt, "get"));
    }

    /** The doc's first sentence, HTML tags and runs of white space removed (the full text is Hudi's). */
    static String firstSentence(String doc) {
        if (doc == null) return "";
        String s = doc.replaceAll("<[^>]+>", " ").replaceAll("\\s+", " ").trim();
        int end = -1;
        for (int i = 0; i + 1 < s.length(); i++) {
            if ((s.charAt(i) == '.' || s.charAt(i) == '!' || s.charAt(i) == '?') && s.charAt(i + 1) == ' '
                    && i > 0 && !Character.isDigit(s.charAt(i - 1))
                    && !s.substring(Math.max(0, i - 4), i).matches(".*\\b(e\\.g|i\\.e|etc|vs)$")) {
                end = i + 1;
                break;
            }
        }
        if (end > 0) s = s.substring(0, end);
        return s.length() > 400 ? s.substring(0, 397) + "..." : s;
    }

    static String q(String s) {
        if (s == null) return "\"\"";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
