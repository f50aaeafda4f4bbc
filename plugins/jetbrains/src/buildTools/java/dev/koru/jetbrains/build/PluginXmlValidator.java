// Build-time check of META-INF/plugin.xml inside the built plugin jar: well-formed, identity fields and ids present, and every declared extension, listener and action class exists and implements the platform type its extension point requires (real API jars or the compile-only stubs).
package dev.koru.jetbrains.build;

import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

import javax.xml.parsers.DocumentBuilderFactory;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.jar.JarFile;
import java.util.zip.ZipEntry;

/** Usage: java -cp API_JARS:STUBS:PLUGIN_JAR PluginXmlValidator PLUGIN_JAR; exit 1 with the problems listed. */
public final class PluginXmlValidator {
    /** Extension point → the attribute naming the class, the type it must implement, and attributes it needs. */
    private static final Map<String, String[]> EXTENSION_POINTS = Map.of(
            "postStartupActivity", new String[] {"implementation", "com.intellij.openapi.startup.StartupActivity"},
            "statusBarWidgetFactory", new String[] {"implementation", "com.intellij.openapi.wm.StatusBarWidgetFactory", "id"},
            "applicationConfigurable", new String[] {"instance", "com.intellij.openapi.options.Configurable", "id", "displayName"});

    /** Extension points of optional dependencies: plugin id → (extension tag → the type its class must extend). */
    private static final Map<String, Map<String, String>> OPTIONAL_EXTENSION_POINTS = Map.of(
            "org.jetbrains.plugins.terminal", Map.of("localTerminalCustomizer", "org.jetbrains.plugins.terminal.LocalTerminalCustomizer"));

    private final List<String> problems = new ArrayList<>();
    private final List<String> notes = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: PluginXmlValidator PLUGIN_JAR");
            System.exit(2);
        }
        PluginXmlValidator validator = new PluginXmlValidator();
        validator.validate(args[0]);
        validator.notes.forEach(note -> System.out.println("plugin.xml: " + note));
        if (!validator.problems.isEmpty()) {
            validator.problems.forEach(problem -> System.err.println("plugin.xml: PROBLEM: " + problem));
            System.exit(1);
        }
        System.out.println("plugin.xml: valid");
    }

    void validate(String jarPath) throws Exception {
        Document document;
        Map<String, Document> optionalConfigs = new java.util.HashMap<>();
        try (JarFile jar = new JarFile(jarPath)) {
            ZipEntry entry = jar.getEntry("META-INF/plugin.xml");
            if (entry == null) {
                problems.add(jarPath + " has no META-INF/plugin.xml");
                return;
            }
            for (java.util.Enumeration<java.util.jar.JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
                String name = e.nextElement().getName();
                if (name.startsWith("com/intellij/") || name.startsWith("com/jediterm/") || name.startsWith("kotlinx/")
                        || name.startsWith("org/jetbrains/plugins/terminal/")) {
                    problems.add("the jar ships a platform class (a compile-only stub?): " + name);
                }
            }
            DocumentBuilderFactory factory = DocumentBuilderFactory.newInstance();
            factory.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
            try (InputStream in = jar.getInputStream(entry)) {
                document = factory.newDocumentBuilder().parse(in);
            } catch (Exception e) {
                problems.add("not well-formed: " + e.getMessage());
                return;
            }
            for (Element depends : children(document.getDocumentElement(), "depends")) {
                String configFile = depends.getAttribute("config-file");
                if (configFile.isBlank()) continue;
                String dependency = depends.getTextContent().trim();
                if (!"true".equals(depends.getAttribute("optional"))) problems.add("<depends config-file=" + configFile + "> is not optional");
                ZipEntry config = jar.getEntry("META-INF/" + configFile);
                if (config == null) {
                    problems.add("<depends config-file=" + configFile + ">: META-INF/" + configFile + " is not in the jar");
                    continue;
                }
                try (InputStream in = jar.getInputStream(config)) {
                    optionalConfigs.put(dependency, factory.newDocumentBuilder().parse(in));
                } catch (Exception e) {
                    problems.add(configFile + " is not well-formed: " + e.getMessage());
                }
            }
        }
        for (Map.Entry<String, Document> optional : optionalConfigs.entrySet()) {
            Map<String, String> points = OPTIONAL_EXTENSION_POINTS.get(optional.getKey());
            if (points == null) {
                problems.add("optional dependency " + optional.getKey() + ": add its extension points to PluginXmlValidator's table");
                continue;
            }
            for (Element extensions : children(optional.getValue().getDocumentElement(), "extensions")) {
                if (!optional.getKey().equals(extensions.getAttribute("defaultExtensionNs"))) {
                    problems.add("the config file of " + optional.getKey() + " extends " + extensions.getAttribute("defaultExtensionNs"));
                }
                for (Element extension : children(extensions, null)) {
                    String required = points.get(extension.getTagName());
                    if (required == null) problems.add("unknown extension point <" + extension.getTagName() + "> of " + optional.getKey());
                    else checkClass(extension.getTagName(), extension.getAttribute("implementation"), required);
                }
            }
        }
        Element root = document.getDocumentElement();
        if (!"idea-plugin".equals(root.getTagName())) problems.add("the root element is <" + root.getTagName() + ">, not <idea-plugin>");
        String id = text(root, "id");
        if (id == null || !id.matches("[A-Za-z0-9][A-Za-z0-9._-]*")) problems.add("<id> missing or not an id: " + id);
        for (String field : new String[] {"name", "version", "vendor", "description"}) {
            String value = text(root, field);
            if (value == null || value.isBlank()) problems.add("<" + field + "> is missing or empty");
            else if (value.contains("@")) problems.add("<" + field + "> still holds a placeholder: " + value);
        }
        Element version = first(root, "idea-version");
        if (version == null || version.getAttribute("since-build").isBlank()) problems.add("<idea-version since-build> is missing");
        if (!texts(root, "depends").contains("com.intellij.modules.platform")) {
            problems.add("<depends>com.intellij.modules.platform</depends> is missing (needed to load in every IntelliJ-based IDE)");
        }
        Set<String> ids = new HashSet<>();
        for (Element extensions : children(root, "extensions")) {
            String ns = extensions.getAttribute("defaultExtensionNs");
            if (!"com.intellij".equals(ns)) problems.add("<extensions defaultExtensionNs=\"" + ns + "\">: only com.intellij is used");
            for (Element extension : children(extensions, null)) {
                String[] rule = EXTENSION_POINTS.get(extension.getTagName());
                if (rule == null) {
                    problems.add("unknown extension point <" + extension.getTagName() + ">: add it to PluginXmlValidator's table");
                    continue;
                }
                for (int i = 2; i < rule.length; i++) {
                    if (extension.getAttribute(rule[i]).isBlank()) problems.add("<" + extension.getTagName() + "> needs " + rule[i] + "=");
                }
                if (!extension.getAttribute("id").isBlank() && !ids.add(extension.getAttribute("id"))) {
                    problems.add("duplicate id " + extension.getAttribute("id"));
                }
                checkClass(extension.getTagName(), extension.getAttribute(rule[0]), rule[1]);
            }
        }
        for (Element listeners : children(root, "applicationListeners")) {
            for (Element listener : children(listeners, "listener")) {
                String topic = listener.getAttribute("topic");
                checkClass("listener", listener.getAttribute("class"), topic);
            }
        }
        for (Element actions : children(root, "actions")) {
            for (Element action : children(actions, "action")) {
                if (action.getAttribute("id").isBlank() || !ids.add(action.getAttribute("id"))) {
                    problems.add("<action> without a unique id: " + action.getAttribute("id"));
                }
                checkClass("action " + action.getAttribute("id"), action.getAttribute("class"), "com.intellij.openapi.actionSystem.AnAction");
            }
        }
    }

    private void checkClass(String where, String className, String requiredType) {
        if (className == null || className.isBlank()) {
            problems.add(where + ": no class named");
            return;
        }
        ClassLoader loader = PluginXmlValidator.class.getClassLoader();
        Class<?> required;
        try {
            required = Class.forName(requiredType, false, loader);
        } catch (ClassNotFoundException | LinkageError e) {
            problems.add(where + ": the platform type " + requiredType + " is in neither the API jars nor the stubs");
            return;
        }
        Class<?> declared;
        try {
            declared = Class.forName(className, false, loader);
        } catch (ClassNotFoundException | LinkageError e) {
            problems.add(where + ": class " + className + " is not in the plugin jar (" + e + ")");
            return;
        }
        if (!required.isAssignableFrom(declared)) problems.add(where + ": " + className + " does not implement " + requiredType);
        String origin = required.getProtectionDomain().getCodeSource() == null ? "?"
                : required.getProtectionDomain().getCodeSource().getLocation().getPath();
        notes.add(where + " → " + className + " implements " + requiredType + " (from " + origin + ")");
    }

    private static List<Element> children(Element parent, String tag) {
        List<Element> out = new ArrayList<>();
        NodeList nodes = parent.getChildNodes();
        for (int i = 0; i < nodes.getLength(); i++) {
            Node node = nodes.item(i);
            if (node instanceof Element && (tag == null || tag.equals(((Element) node).getTagName()))) out.add((Element) node);
        }
        return out;
    }

    private static Element first(Element parent, String tag) {
        List<Element> found = children(parent, tag);
        return found.isEmpty() ? null : found.get(0);
    }

    private static String text(Element parent, String tag) {
        Element element = first(parent, tag);
        return element == null ? null : element.getTextContent().trim();
    }

    private static List<String> texts(Element parent, String tag) {
        List<String> out = new ArrayList<>();
        for (Element element : children(parent, tag)) out.add(element.getTextContent().trim());
        return out;
    }
}
