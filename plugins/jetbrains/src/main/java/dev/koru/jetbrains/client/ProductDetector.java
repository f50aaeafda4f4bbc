// Which JetBrains IDE the plugin runs in, from the build's product code (ApplicationInfo.getBuild().getProductCode()) or the platform prefix (idea.platform.prefix), as a protocol product name `jetbrains-<product>`.
package dev.koru.jetbrains.client;

import java.util.Locale;
import java.util.Map;

/** Maps build info to the protocol's {@code jetbrains-<product>} names (protocol/src/product.rs keeps any such name). */
public final class ProductDetector {
    private ProductDetector() {}

    /** Build product codes (the prefix of a build number such as {@code IU-243.21565.193}). */
    private static final Map<String, String> BY_PRODUCT_CODE = Map.ofEntries(
            Map.entry("IU", "idea"), Map.entry("IC", "idea"), Map.entry("IE", "idea"),
            Map.entry("PY", "pycharm"), Map.entry("PC", "pycharm"), Map.entry("PE", "pycharm"),
            Map.entry("WS", "webstorm"), Map.entry("GO", "goland"), Map.entry("RD", "rider"),
            Map.entry("CL", "clion"), Map.entry("PS", "phpstorm"), Map.entry("RM", "rubymine"),
            Map.entry("DB", "datagrip"), Map.entry("DS", "dataspell"), Map.entry("RR", "rustrover"),
            Map.entry("AI", "android-studio"), Map.entry("QA", "aqua"), Map.entry("MPS", "mps"),
            Map.entry("GW", "gateway"), Map.entry("FL", "fleet"));

    /** Platform prefixes ({@code PlatformUtils}), lower-cased. */
    private static final Map<String, String> BY_PLATFORM_PREFIX = Map.ofEntries(
            Map.entry("idea", "idea"), Map.entry("ideaedu", "idea"),
            Map.entry("python", "pycharm"), Map.entry("pycharmcore", "pycharm"), Map.entry("pycharmedu", "pycharm"),
            Map.entry("webstorm", "webstorm"), Map.entry("goland", "goland"), Map.entry("rider", "rider"),
            Map.entry("clion", "clion"), Map.entry("phpstorm", "phpstorm"), Map.entry("ruby", "rubymine"),
            Map.entry("datagrip", "datagrip"), Map.entry("dataspell", "dataspell"), Map.entry("rustrover", "rustrover"),
            Map.entry("androidstudio", "android-studio"), Map.entry("aqua", "aqua"));

    /**
     * The protocol product for a build: by product code first, then by platform prefix,
     * then by the application name; {@code jetbrains-<code>} for a code this table lacks.
     */
    public static String detect(String productCode, String platformPrefix, String appName) {
        String code = productCode == null ? "" : productCode.trim().toUpperCase(Locale.ROOT);
        String byCode = BY_PRODUCT_CODE.get(code);
        if (byCode != null) return "jetbrains-" + byCode;
        String prefix = platformPrefix == null ? "" : platformPrefix.trim().toLowerCase(Locale.ROOT);
        String byPrefix = BY_PLATFORM_PREFIX.get(prefix);
        if (byPrefix != null) return "jetbrains-" + byPrefix;
        String name = appName == null ? "" : appName.toLowerCase(Locale.ROOT);
        if (name.contains("android studio")) return "jetbrains-android-studio";
        for (String product : new String[] {"pycharm", "webstorm", "goland", "rider", "clion", "phpstorm", "rubymine",
                "datagrip", "dataspell", "rustrover", "aqua"}) {
            if (name.contains(product)) return "jetbrains-" + product;
        }
        if (name.contains("intellij") || name.contains("idea")) return "jetbrains-idea";
        if (code.matches("[A-Z]{2,4}")) return "jetbrains-" + code.toLowerCase(Locale.ROOT);
        return "jetbrains-idea";
    }

    /** The product code of a full build number such as {@code IU-243.21565.193} ({@code IU}), or "". */
    public static String productCodeOf(String buildNumber) {
        if (buildNumber == null) return "";
        int dash = buildNumber.indexOf('-');
        return dash > 0 ? buildNumber.substring(0, dash) : "";
    }
}
