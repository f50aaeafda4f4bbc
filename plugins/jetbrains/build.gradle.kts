// Standard Gradle build (IntelliJ Platform Gradle Plugin 2.x) for people with current SDKs and network access to the JetBrains repositories; CI does not run it (it builds with build.sh and javac) — see README.md.
import org.jetbrains.intellij.platform.gradle.TestFrameworkType

plugins {
    java
    id("org.jetbrains.intellij.platform") version "2.2.1"
}

group = "dev.koru"
version = providers.gradleProperty("pluginVersion").get()

java {
    toolchain { languageVersion = JavaLanguageVersion.of(17) }
}

repositories {
    mavenCentral()
    intellijPlatform { defaultRepositories() }
}

dependencies {
    implementation("com.google.code.gson:gson:2.10.1")
    intellijPlatform {
        // Any IntelliJ-based IDE from 2022.3 on; IntelliJ IDEA Community is the smallest to download.
        intellijIdeaCommunity("2024.3")
        testFramework(TestFrameworkType.Platform)
    }
    testImplementation("org.junit.jupiter:junit-jupiter:5.10.2")
    testRuntimeOnly("org.junit.platform:junit-platform-launcher")
}

// The compile-only stubs (src/compileOnlyStubs) are for build.sh only: the real SDK has those classes.
sourceSets {
    main {
        java.setSrcDirs(listOf("src/main/java"))
        resources.setSrcDirs(listOf("src/main/resources"))
    }
    test { java.setSrcDirs(listOf("src/test/java")) }
}

intellijPlatform {
    pluginConfiguration {
        version = project.version.toString()
        ideaVersion {
            sinceBuild = "223"
            untilBuild = provider { null }
        }
    }
    buildSearchableOptions = false
}

tasks {
    processResources {
        filesMatching("META-INF/plugin.xml") { filter { it.replace("@VERSION@", project.version.toString()) } }
        // What PluginInfo reads (build.sh writes the same file).
        doLast {
            val dir = destinationDir.resolve("dev/koru/jetbrains")
            dir.mkdirs()
            dir.resolve("plugin.properties").writeText("version=${project.version}\n")
        }
    }
    test {
        useJUnitPlatform()
        // The real-daemon tests need the koru binary: KORU_BIN, else ../../target/debug/koru.
        environment("KORU_ROOT", rootDir.resolve("../..").canonicalPath)
    }
}
